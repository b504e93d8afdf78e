#!/usr/bin/env bash
# The paired frontier with the head samplers, step counts and the distilled
# head (docs/FRONTIER.md, "Which head sampler, without training?"). Six frontier
# runs, N images per configuration, CFG 1 and 3, seeds 1, 2 and 3, two at a time (one per core):
#   seed 1: every configuration plus the one-token-per-step target, which is also sampled again
#           at seed 2 (the paired reference of the seed-2 runs and the noise floor);
#   seed 2: every configuration but the target, with `fast` sampled again at seed 3;
#   seed 3: as seed 1 (the target sampled again at seed 4), a third pair and a second floor.
# Then the head's share per sampler (bench --profile --samplers) at CFG 1 and 3; then the speeds
# again on the machine left quiet (N_SPEED images per configuration, seed 7, both CFGs at once,
# one per core): a frontier run's chunks interleave, but a burst of other work during the long
# FID runs still falls unevenly on configurations; then the paired reports, FIDs from the four
# FID runs and speeds from the quiet runs alone.
# One ONNX thread per process, nice 19 for the FID runs.
# usage: make build && bash scripts/bench/frontier_samplers.sh [N=2000] [OUT=runs/frontier-samplers] [N_SPEED=640]
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-2000}"; out="${2:-runs/frontier-samplers}"; n_speed="${3:-640}"
fast=target:num_iter=4:steps=25
configs="$fast,target:num_iter=4,target:num_iter=7,\
target:num_iter=4:steps=25:sampler=ddim:eta=1,target:num_iter=4:steps=10:sampler=ddim:eta=1,\
target:num_iter=7:steps=10:sampler=ddim:eta=1,target:num_iter=4:steps=10:sampler=ddim:eta=0,\
target:num_iter=4:steps=10:sampler=dpmpp-2m,target:num_iter=4:steps=10:sampler=dpmpp-2m-sde,\
target:num_iter=4:steps=1:sampler=distilled,target:num_iter=4:steps=2:sampler=distilled,\
target:num_iter=4:steps=4:sampler=distilled,target:num_iter=7:steps=2:sampler=distilled,\
target:num_iter=3:steps=10:sampler=ddim:eta=1,target:num_iter=3:steps=1:sampler=distilled,\
target:num_iter=3:steps=2:sampler=distilled,target:num_iter=3:steps=4:sampler=distilled,\
target:num_iter=2:steps=1:sampler=distilled,target:num_iter=2:steps=2:sampler=distilled"
mkdir -p "$out"
run() { # cfg seed
  local cfg=$1 seed=$2 ref extra=""
  if [ "$seed" = 2 ]; then ref=$fast; else ref=target; extra=",target"; fi
  nice -n 19 ./bin/marspec frontier --out "$out/cfg$cfg-seed$seed" --n "$n" --cfg "$cfg" --seed "$seed" \
    --threads 1 --reference-config "$ref" --configs "$configs$extra" >"$out/cfg$cfg-seed$seed.log" 2>&1
}
(run 3 1; run 1 2; run 1 3) & lane_a=$!
(run 1 1; run 3 2; run 3 3) & lane_b=$!
wait $lane_a $lane_b
for cfg in 1 3; do
  nice -n 19 ./bin/marspec bench --profile --threads 1 --images 100 --num-iter 4 --cfg "$cfg" --rounds 3 \
    --samplers ddpm:25,ddpm:50,ddim:25:1,ddim:10:1,ddim:10:0,dpmpp-2m:10,distilled:1,distilled:2,distilled:4 \
    | tee "$out/profile-cfg$cfg.txt"
  nice -n 19 ./bin/marspec bench --profile --threads 1 --images 100 --num-iter 3 --cfg "$cfg" --rounds 3 \
    --samplers ddpm:25,ddim:10:1,ddim:25:1,distilled:1,distilled:2,distilled:4 | tee "$out/profile-it3-cfg$cfg.txt"
done
speed() { # cfg
  ./bin/marspec frontier --out "$out/speed-cfg$1" --n "$n_speed" --cfg "$1" --seed 7 --threads 1 \
    --reference-config target --configs "$configs,target" >"$out/speed-cfg$1.log" 2>&1
}
speed 1 & speed 3 & wait
for cfg in 1 3; do
  ./bin/marspec frontier --paired "$out/cfg$cfg-seed1,$out/cfg$cfg-seed2,$out/cfg$cfg-seed3" --paired-speed "$out/speed-cfg$cfg" \
    --reference-config target --paired-plot "$out/paired-cfg$cfg.png" | tee "$out/paired-cfg$cfg.md"
done
