#!/usr/bin/env bash
# int8 against fp32 on an embedded model (docs/results/archive-2026-11.md, "Reduced precision: int8 weights"): the target or the
# draft at num_iter 4 with 25 ddpm steps and final-step noise (the fast preset when these were
# measured); CFG 1, N = 2,000 (200 per class) at seeds 1 and 2, fp32 and int8 in turns at
# each seed (same seeds, so the pair shares its noise), one thread; then FID against the test
# set, paired differences, and the two-sample FIDs that give the noise floor.
# usage: make build && bash scripts/bench/precision_fid.sh [target|draft]
#   uses the pack quantised into out/q/MODEL: /usr/bin/python3 scripts/packs/quantize_pack.py models/MODEL --out out/q/MODEL
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:-target}"
case "$model" in
  target) args=(--target out/q/target --mode target --num-iter 4 --steps 25 --final-step-noise) ;;
  draft) args=(--mode draft --draft out/q/draft --num-iter 4 --steps 25 --final-step-noise) ;;
  *) echo "usage: $0 [target|draft]" >&2; exit 2 ;;
esac
stats=models/evaluator/fmnist_test_stats.npz
dir=out/precision/$model
mkdir -p "$dir"
fid() { ./bin/marspec fid --quiet --threads 1 "$1" "$2" | head -1; }
for seed in 1 2; do for prec in fp32 int8; do
  out=$dir/s$seed-$prec; rm -rf "$out"
  t0=$(date +%s.%N)
  ./bin/marspec generate "${args[@]}" --precision "$prec" --class all --n 200 --seed "$seed" \
    --threads 1 --grid none --quiet --out "$out" > /dev/null
  t1=$(date +%s.%N)
  echo "$model seed $seed $prec: $(python3 -c "print('%.1f' % (2000/($t1-$t0)))") images/s, vs test set: $(fid "$out" $stats)"
done; done
echo "noise floor, fp32 seed 1 vs fp32 seed 2: $(fid $dir/s1-fp32 $dir/s2-fp32)"
echo "int8 seed 1 vs fp32 seed 2 (FID to the reference's 2nd sample): $(fid $dir/s1-int8 $dir/s2-fp32)"
echo "int8 seed 2 vs fp32 seed 1: $(fid $dir/s2-int8 $dir/s1-fp32)"
echo "int8 vs fp32, same seed 1 (shared noise): $(fid $dir/s1-int8 $dir/s1-fp32)"
echo "int8 vs fp32, same seed 2 (shared noise): $(fid $dir/s2-int8 $dir/s2-fp32)"
echo done
