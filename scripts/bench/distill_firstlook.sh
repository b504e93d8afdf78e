#!/usr/bin/env bash
# The distilled head's first look (docs/FRONTIER.md): target alone, num_iter 4, N images per
# configuration, one frontier run per (cfg, seed): ddpm 25 steps (the fast preset, also the
# reference sampled again at a second seed), ddim eta 0 at 25 steps (the teacher), ddim eta 1 at 10 steps, and the distilled head at
# 1, 2 and 4 steps, chunks interleaved so the images/s are side by side; seed 1 adds the
# one-token-per-step target for the speed ratio. Then the head's share per sampler
# (bench --profile --samplers). One ONNX thread, nice 19.
# usage: make build && bash scripts/bench/distill_firstlook.sh [N=1000] [TARGET=target] [OUT=runs/distill-firstlook]
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-1000}"; target="${2:-target}"; out="${3:-runs/distill-firstlook}"
ref=target:num_iter=4:steps=25
configs="$ref,target:num_iter=4:steps=25:sampler=ddim:eta=0,target:num_iter=4:steps=10:sampler=ddim:eta=1,target:num_iter=4:steps=1:sampler=distilled,target:num_iter=4:steps=2:sampler=distilled,target:num_iter=4:steps=4:sampler=distilled"
for seed in 1 2; do for cfg in 1 3; do
  extra=""; [ "$seed" = 1 ] && extra=",target"
  nice -n 19 ./bin/marspec frontier --target "$target" --out "$out/cfg$cfg-seed$seed" --n "$n" --cfg "$cfg" --seed "$seed" \
    --threads 1 --quiet --reference-config "$ref" --configs "$configs$extra"
done; done
for cfg in 1 3; do
  nice -n 19 ./bin/marspec bench --profile --target "$target" --threads 1 --images 100 --num-iter 4 --cfg "$cfg" --rounds 3 \
    --samplers ddpm:25,ddim:10:1,distilled:1,distilled:2,distilled:4 | tee "$out/profile-cfg$cfg.txt"
done
