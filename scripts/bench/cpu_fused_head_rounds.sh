#!/usr/bin/env bash
# The CPU's head paths side by side on whole images: the same generate command with the
# per-step head (MARSPEC_HEAD_LOOP=off, the CPU's default) and the fused head
# (MARSPEC_HEAD_LOOP=on, what CUDA samples with), alternated in rounds, one thread pinned to one
# core; per line the run's seconds per image (sampling, without opening), peak RSS and the load
# average, then the largest pixel difference between the two paths' images (the tokens agree to
# about 1e-5 of their size: TestFusedHeadOnMARLayout). PACK: a random MAR-B pack
# (`make_random_packs.py --models mar_base`), after `quantize_pack.py PACK` for int8.
#
# usage: bash scripts/bench/cpu_fused_head_rounds.sh PACK OUT [ROUNDS=2] [CORE=1]
#   (NUM_ITER=64 STEPS=100 CFG=2.9 PRECISION=int8 CACHE=on CLASS=0 SEED=1 to change the run)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
pack=$1 out=$2 rounds="${3:-2}" core="${4:-1}"
ni="${NUM_ITER:-64}" steps="${STEPS:-100}" cfg="${CFG:-2.9}" prec="${PRECISION:-int8}" cache="${CACHE:-on}"
mkdir -p "$out"
gen=(generate --model "$pack" --n 1 --class "${CLASS:-0}" --seed "${SEED:-1}" --num-iter "$ni" --steps "$steps"
  --cfg "$cfg" --batch 1 --threads 1 --precision "$prec" --cache "$cache" --json --overwrite --grid none)
for r in $(seq "$rounds"); do
  for path in per-step fused; do
    log="$out/$path-r$r.log" loop=on
    [ "$path" = per-step ] && loop=off
    MARSPEC_HEAD_LOOP=$loop taskset -c "$core" /usr/bin/time -v "$repo/bin/marspec" "${gen[@]}" --out "$out/img-$path-r$r" >"$log" 2>&1
    echo "round=$r $path seconds=$(grep -o '"seconds": *[0-9.e+-]*' "$log" | head -1 | sed 's/.*: *//')" \
      "rss_kb=$(awk '/Maximum resident/{print $NF}' "$log") load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
/usr/bin/python3 "$repo/scripts/bench/png_diff.py" "per-step against fused" "$out/img-per-step-r1" "$out/img-fused-r1"
