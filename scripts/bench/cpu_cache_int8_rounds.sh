#!/usr/bin/env bash
# One image per configuration, alternated in rounds so drift in the machine's load hits all
# alike: the official MAR code (fp32), marspec fp32, fp32 with the cache, int8 with the cache,
# int8; one thread each, pinned to one core, the run's seconds per image (sampling, without
# opening or loading) and peak RSS (/usr/bin/time -v) per line, then the mean absolute pixel
# difference between the cache's fp32 and int8 images (0-255). PACK is a random pack from
# `make_random_packs.py --models mar_base --checkpoint` after `quantize_pack.py PACK`; CODE is
# a copy of the official repository (github.com/LTH14/mar).
#
# usage: bash scripts/bench/cpu_cache_int8_rounds.sh PACK CODE OUT [ROUNDS=2] [CORE=1]
#   (NUM_ITER=64 STEPS=10 CFG=2.9 CLASS=0 SEED=1 in the environment to change the run)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
pack=$1 code=$2 out=$3 rounds="${4:-2}" core="${5:-1}"
ni="${NUM_ITER:-64}" steps="${STEPS:-10}" cfg="${CFG:-2.9}" class="${CLASS:-0}" seed="${SEED:-1}"
mkdir -p "$out"
one() { # one ROUND NAME COMMAND...: a line with seconds, peak RSS and the load average
  local round=$1 name=$2 log="$out/$2-r$1.log" rc=0; shift 2
  taskset -c "$core" /usr/bin/time -v "$@" >"$log" 2>&1 || rc=$?
  echo "round=$round $name rc=$rc seconds=$(grep -o '"seconds": *[0-9.e+-]*' "$log" | head -1 | sed 's/.*: *//')" \
    "rss_kb=$(awk '/Maximum resident/{print $NF}' "$log") load=$(cut -d' ' -f1 /proc/loadavg)"
}
gen="generate --model $pack --n 1 --class $class --seed $seed --num-iter $ni --steps $steps --cfg $cfg --batch 1 --threads 1 --json --overwrite --grid none"
for r in $(seq "$rounds"); do
  one "$r" official env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
    /usr/bin/python3 "$repo/scripts/bench/official_mar_bench.py" --code "$code" --model mar_base --pack "$pack" \
    --batch 1 --images 1 --num-iter "$ni" --steps "$steps" --cfg "$cfg" --cpu --warmup 0 --threads 1
  one "$r" fp32 "$repo/bin/marspec" $gen --out "$out/img-fp32-r$r"
  one "$r" fp32-cache "$repo/bin/marspec" $gen --cache on --out "$out/img-fp32-cache-r$r"
  one "$r" int8-cache "$repo/bin/marspec" $gen --cache on --precision int8 --out "$out/img-int8-cache-r$r"
  one "$r" int8 "$repo/bin/marspec" $gen --precision int8 --out "$out/img-int8-r$r"
done
/usr/bin/python3 "$repo/scripts/bench/png_diff.py" "cache fp32 against int8" "$out/img-fp32-cache-r1" "$out/img-int8-cache-r1"
