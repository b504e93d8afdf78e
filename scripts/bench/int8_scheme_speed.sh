#!/usr/bin/env bash
# Images/s of one pack at fp32, at int8 with activations quantised per row (quantize_pack.py
# today) and at int8 with one activation scale per call (the scheme before, which ONNX Runtime
# fuses into DynamicQuantizeMatMul but which makes a row depend on its batch-mates), in rounds:
# each round runs the three one after the other, the order turning, so the per-round ratios
# compare runs made seconds apart (docs/BENCHMARKS.md, "int8").
# usage: make build && bash scripts/bench/int8_scheme_speed.sh [REPS=5] [PACK=models/target] [N per class=100] [generate flags...]
#   default flags: --preset fast (the default request's schedule and head), one ONNX thread
set -euo pipefail
cd "$(dirname "$0")/../.."
reps="${1:-5}"; pack="${2:-models/target}"; n="${3:-100}"; shift $(( $# < 3 ? $# : 3 ))
flags=("$@"); [ ${#flags[@]} -gt 0 ] || flags=(--preset fast)
work=out/int8-scheme
rm -rf "$work"; mkdir -p "$work"
# the per-call scheme is quantize_pack.py as it was at commit 2979e2c
git show 2979e2c:scripts/packs/quantize_pack.py >"$work/quantize_per_call.py"
/usr/bin/python3 scripts/packs/quantize_pack.py "$pack" --out "$work/per-row" >/dev/null
/usr/bin/python3 "$work/quantize_per_call.py" "$pack" --out "$work/per-call" >/dev/null
run() { # folder precision -> images/s
  rm -rf "$work/images"
  ./bin/marspec generate --target "$work/$1" --mode target "${flags[@]}" --precision "$2" --class all --n "$n" --seed 1 \
    --threads 1 --grid none --quiet --json --out "$work/images" | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["images_per_second"])'
}
names=(fp32 int8-per-row int8-per-call); runs=("per-row fp32" "per-row int8" "per-call int8")
declare -A got
for r in $(seq "$reps"); do
  for k in 0 1 2; do
    i=$(( (k + r) % 3 ))
    got[${names[$i]}]+="$(run ${runs[$i]}) "
  done
done
python3 - "${got[fp32]}" "${got[int8-per-row]}" "${got[int8-per-call]}" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" "${flags[*]}" <<'PY'
import statistics, sys
fp32, row, call = ([float(x) for x in a.split()] for a in sys.argv[1:4])
print(f"CPU:{sys.argv[4]}; flags: {sys.argv[5]}; images/s per round")
for name, v in (("fp32", fp32), ("int8 per row", row), ("int8 per call", call)):
    print(f"  {name:14s} {v}  median {statistics.median(v):.1f}")
ratio = lambda a, b: statistics.median(x / y for x, y in zip(a, b))
print(f"median per-round ratios: per row / fp32 {ratio(row, fp32):.2f}x, per call / fp32 {ratio(call, fp32):.2f}x, per row / per call {ratio(row, call):.2f}x")
PY
rm -rf "$work/images"
