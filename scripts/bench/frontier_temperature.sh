#!/usr/bin/env bash
# The paired frontier with temperature as a configuration's setting
# (the distilled head's input noise scaled, as MAR's temperature scales its reverse steps'
# noise), beside the training-free points at the same temperatures (docs/FRONTIER.md,
# "The frontier around the presets"). Same design as frontier_finetuned_head.sh:
#   fid:   N images per configuration, CFG 1 and 3, seeds 1, 2 and 3, two lanes (one per core);
#          seeds 1 and 3 hold the one-token-per-step target and its second sample (the seed-2
#          runs' reference and the noise floor); nice 19, one ONNX thread per process;
#   speed: on the machine left quiet, N_SPEED images per configuration, seed 7, CFG 1 and 3 at
#          once (one per core);
#   report: the paired tables.
# usage: make build && bash scripts/bench/frontier_temperature.sh [fid|speed|report|all] [N=2000] [OUT=runs/frontier-temp] [N_SPEED=320]
set -euo pipefail
cd "$(dirname "$0")/../.."
what="${1:-all}"; n="${2:-2000}"; out="${3:-runs/frontier-temp}"; n_speed="${4:-320}"
bin="${MARSPEC:-./bin/marspec}"
balanced=target:num_iter=3:steps=10:sampler=ddim:eta=1
quality=target:num_iter=4:steps=25:sampler=ddim:eta=1
free="$balanced,$balanced:temperature=0.9,$quality,$quality:temperature=0.9"
d1=steps=1:sampler=distilled
d2=steps=2:sampler=distilled
heads="target:num_iter=2:$d1:temperature=0.85,target:num_iter=2:$d1:temperature=0.9,\
target:num_iter=3:$d1,target:num_iter=3:$d1:temperature=0.85,target:num_iter=3:$d1:temperature=0.9,\
target:num_iter=4:$d1:temperature=0.85,target:num_iter=4:$d1:temperature=0.9,\
target:num_iter=3:$d2:temperature=0.9,target:num_iter=4:$d2:temperature=0.9"
configs="$free,$heads"
mkdir -p "$out"
fid_run() { # cfg seed
  local cfg=$1 seed=$2 ref=target extra=",target"
  if [ "$seed" = 2 ]; then ref=$balanced; extra=""; fi
  nice -n 19 "$bin" frontier --out "$out/cfg$cfg-seed$seed" --n "$n" --cfg "$cfg" --seed "$seed" --quiet \
    --threads 1 --reference-config "$ref" --configs "$configs$extra" >"$out/cfg$cfg-seed$seed.log" 2>&1
}
speed_run() { # cfg
  "$bin" frontier --out "$out/speed-cfg$1" --n "$n_speed" --cfg "$1" --seed 7 --threads 1 --quiet \
    --reference-config target --configs "$configs,target" >"$out/speed-cfg$1.log" 2>&1
}
if [ "$what" = fid ] || [ "$what" = all ]; then
  (fid_run 1 1; fid_run 1 2; fid_run 1 3) & lane_a=$!
  (fid_run 3 1; fid_run 3 2; fid_run 3 3) & lane_b=$!
  wait $lane_a $lane_b
fi
if [ "$what" = speed ] || [ "$what" = all ]; then
  speed_run 1 & speed_run 3 & wait
fi
if [ "$what" = report ] || [ "$what" = all ]; then
  for cfg in 1 3; do
    "$bin" frontier --paired "$out/cfg$cfg-seed1,$out/cfg$cfg-seed2,$out/cfg$cfg-seed3" --paired-speed "$out/speed-cfg$cfg" \
      --reference-config target --paired-plot "$out/paired-cfg$cfg.png" | tee "$out/paired-cfg$cfg.md"
  done
fi
