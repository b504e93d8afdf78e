#!/usr/bin/env bash
# The paired frontier with the head distilled by distribution matching
# (scripts/train/dmd_head.py, now the pack's distilled head), the cache across AR steps and int8
# (docs/results/archive-2026-11.md, "The fine-tuned head, the cache and int8 on the frontier").
# FID runs, N images per configuration, CFG 1 and 3, seeds 1, 2 and 3, two lanes (one per core):
#   seeds 1 and 3: every configuration plus the one-token-per-step target, whose second sample
#                  (seeds 2 and 4) is the seed-2 runs' paired reference and the noise floor;
#   seed 2:        every configuration but the target (reference `balanced`).
# The cache pairs: num_iter 16 at both CFGs, num_iter 49 at CFG 1 (the long schedules it is for).
# int8 is a process-wide setting (the packs are opened at one precision), so its configurations
# run in frontier runs of their own (--precision int8, CFG 1, the same seeds), paired against
# the same configurations at fp32 by docs/FRONTIER.md's table.
# Then the speeds on the machine left quiet: N_SPEED images per configuration, seed 7, the fp32
# CFG 1 and CFG 3 runs at once (one per core), then fp32 and int8 at CFG 1 at once.
# One ONNX thread per process, nice 19 for the FID runs.
# usage: make build && bash scripts/bench/frontier_finetuned_head.sh [N=2000] [OUT=runs/frontier-finetuned-head] [N_SPEED=320]
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-2000}"; out="${2:-runs/frontier-finetuned-head}"; n_speed="${3:-320}"
balanced=target:num_iter=3:steps=10:sampler=ddim:eta=1
heads="target:num_iter=2:steps=1:sampler=distilled,target:num_iter=2:steps=2:sampler=distilled,\
target:num_iter=3:steps=1:sampler=distilled,target:num_iter=3:steps=2:sampler=distilled,\
target:num_iter=4:steps=1:sampler=distilled,target:num_iter=4:steps=2:sampler=distilled,\
target:num_iter=3:steps=4:sampler=distilled"
free="$balanced,target:num_iter=4:steps=25:sampler=ddim:eta=1"
it16=target:num_iter=16:steps=10:sampler=ddim:eta=1
it49=target:num_iter=49:steps=10:sampler=ddim:eta=1
configs_1="$free,$heads,$it16,$it16:cache=on,$it49,$it49:cache=on"
configs_3="$free,$heads,$it16,$it16:cache=on"
int8_configs="$balanced,target:num_iter=2:steps=1:sampler=distilled,target:num_iter=2:steps=2:sampler=distilled,\
target:num_iter=3:steps=1:sampler=distilled,target:num_iter=3:steps=2:sampler=distilled"
mkdir -p "$out"
run() { # cfg seed
  local cfg=$1 seed=$2 ref=target extra=",target" configs
  if [ "$cfg" = 1 ]; then configs=$configs_1; else configs=$configs_3; fi
  if [ "$seed" = 2 ]; then ref=$balanced; extra=""; fi
  nice -n 19 ./bin/marspec frontier --out "$out/cfg$cfg-seed$seed" --n "$n" --cfg "$cfg" --seed "$seed" \
    --threads 1 --reference-config "$ref" --configs "$configs$extra" >"$out/cfg$cfg-seed$seed.log" 2>&1
}
int8() { # seed
  nice -n 19 ./bin/marspec frontier --precision int8 --out "$out/int8-cfg1-seed$1" --n "$n" --cfg 1 --seed "$1" \
    --threads 1 --reference-config "$balanced" --configs "$int8_configs" >"$out/int8-cfg1-seed$1.log" 2>&1
}
(run 1 1; run 1 2; run 1 3; int8 1) & lane_a=$!
(run 3 1; run 3 2; run 3 3; int8 2; int8 3) & lane_b=$!
wait $lane_a $lane_b
speed() { # name cfg configs [flags]
  ./bin/marspec frontier --out "$out/speed-$1" --n "$n_speed" --cfg "$2" --seed 7 --threads 1 \
    --reference-config target --configs "$3,target" "${@:4}" >"$out/speed-$1.log" 2>&1
}
speed cfg1 1 "$configs_1" & speed cfg3 3 "$configs_3" & wait
speed int8-cfg1 1 "$int8_configs" --precision int8 & speed fp32-cfg1 1 "$int8_configs" & wait
for cfg in 1 3; do
  ./bin/marspec frontier --paired "$out/cfg$cfg-seed1,$out/cfg$cfg-seed2,$out/cfg$cfg-seed3" --paired-speed "$out/speed-cfg$cfg" \
    --reference-config target --paired-plot "$out/paired-cfg$cfg.png" | tee "$out/paired-cfg$cfg.md"
done
