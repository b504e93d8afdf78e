#!/usr/bin/env bash
# The head samplers' first look (docs/FRONTIER.md): target alone, num_iter 4, CFG 1, one seed,
# 1,000 images per sampler and step count, one thread, then FID against the embedded test set.
# usage: make build && bash scripts/bench/sampler_firstlook.sh [SEED=0]
set -euo pipefail
cd "$(dirname "$0")/../.."
seed="${1:-0}"
for steps in 25 10 5; do for s in "ddpm" "ddim --eta 0" "ddim --eta 1" "dpmpp-2m"; do
  name=$(echo "$s" | tr -d ' -'); out=out/samplers/seed$seed-$steps-$name; rm -rf "$out"
  t0=$(date +%s.%N)
  ./bin/marspec generate --model target --num-iter 4 --steps "$steps" --sampler $s --class all --n 100 \
    --seed "$seed" --threads 1 --grid none --quiet --out "$out" > /dev/null
  t1=$(date +%s.%N)
  f=$(./bin/marspec fid --quiet "$out" models/evaluator/fmnist_test_stats.npz | head -1)
  echo "steps $steps sampler $s: $(python3 -c "print(f'{1000/($t1-$t0):.1f}')") images/s, $f"
done; done
