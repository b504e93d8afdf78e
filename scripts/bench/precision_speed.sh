#!/usr/bin/env bash
# Images/s of the embedded pair at fp32 and int8 (docs/BENCHMARKS.md, "int8 on the CPU"):
# the target at num_iter 4 with 25 ddpm steps (the fast preset when these were measured) and the
# draft with the same schedule, 500 images a run (50 per class), one thread; fp32 and int8 in turns, REPS runs each,
# then the medians, their ratio, and the median of each repetition's int8/fp32 ratio.
# usage: make build && bash scripts/bench/precision_speed.sh [REPS=5]
#   needs out/q/target and out/q/draft: /usr/bin/python3 scripts/packs/quantize_pack.py models/target --out out/q/target (same for draft)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps="${1:-5}"
run() { # model precision -> images/s
  local args=(--target out/q/target --mode target --num-iter 4 --steps 25 --final-step-noise)
  [ "$1" = draft ] && args=(--mode draft --draft out/q/draft --num-iter 4 --steps 25 --final-step-noise)
  rm -rf out/precision-speed
  ./bin/marspec generate "${args[@]}" --precision "$2" --class all --n 50 --seed 1 --threads 1 --grid none \
    --quiet --json --out out/precision-speed | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["images_per_second"])'
}
for model in target draft; do
  fp32=(); int8=()
  for r in $(seq "$reps"); do
    if [ $((r % 2)) = 1 ]; then fp32+=("$(run $model fp32)"); int8+=("$(run $model int8)")
    else int8+=("$(run $model int8)"); fp32+=("$(run $model fp32)"); fi
  done
  python3 - "$model" "${fp32[*]}" "${int8[*]}" <<'PY'
import statistics, sys
model, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
pairs = [y / x for x, y in zip(a, b)]  # each repetition's int8 and fp32 ran back to back
print(f"{model}: fp32 {a} int8 {b} images/s; medians {statistics.median(a):.2f} and {statistics.median(b):.2f}: "
      f"int8 {statistics.median(b)/statistics.median(a):.2f}x (median of the {len(pairs)} back-to-back ratios {statistics.median(pairs):.2f}x)")
PY
done
rm -rf out/precision-speed
