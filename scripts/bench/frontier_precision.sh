#!/usr/bin/env bash
# Precision as a preset's setting (docs/FRONTIER.md, "Does int8 cost quality?"): the embedded pack's
# three tuned presets (fast, balanced and quality, scripts/bench/tuned_presets.sh) at fp32 and, in the same runs, at int8
# (the configuration key precision=int8 opens the packs' int8 graphs beside the fp32 ones), with
# the one-token-per-step target as the reference. Same design as frontier_temperature.sh, CFG 1
# only (the presets are tuned at CFG 1):
#   fid:   N images per configuration, seeds 1, 2 and 3, two lanes (one per core); seeds 1 and 3
#          hold the target and its second sample (seed 2's reference and the noise floor);
#          nice 19, one ONNX thread per process;
#   speed: on the machine left quiet, two runs one after the other, N_SPEED images per
#          configuration, seed 7, every configuration in one process, one ONNX thread (fp32 and
#          int8 side by side);
#   report: the paired table; `marspec tune` reads the same runs.
# usage: make build && bash scripts/bench/frontier_precision.sh [fid|speed|report|all] [N=2000] [OUT=runs/frontier-precision] [N_SPEED=640]
set -euo pipefail
cd "$(dirname "$0")/../.."
what="${1:-all}"; n="${2:-2000}"; out="${3:-runs/frontier-precision}"; n_speed="${4:-640}"
bin="${MARSPEC:-./bin/marspec}"
. scripts/bench/tuned_presets.sh # fast, balanced, quality
configs="$fast,$balanced,$quality,$fast:precision=int8,$balanced:precision=int8,$quality:precision=int8"
mkdir -p "$out"
fid_run() { # seed
  local seed=$1 ref=target extra=",target"
  if [ "$seed" = 2 ]; then ref=$balanced; extra=""; fi
  nice -n 19 "$bin" frontier --out "$out/cfg1-seed$seed" --n "$n" --cfg 1 --seed "$seed" --quiet \
    --threads 1 --reference-config "$ref" --configs "$configs$extra" >"$out/cfg1-seed$seed.log" 2>&1
}
if [ "$what" = fid ] || [ "$what" = all ]; then
  (fid_run 1; fid_run 2) & lane_a=$!
  (fid_run 3) & lane_b=$!
  wait $lane_a $lane_b
fi
if [ "$what" = speed ] || [ "$what" = all ]; then
  for run in speed-cfg1 speed2-cfg1; do # two quiet runs, one after the other; the report averages them
    "$bin" frontier --out "$out/$run" --n "$n_speed" --cfg 1 --seed 7 --threads 1 --quiet \
      --reference-config target --configs "$configs,target" >"$out/$run.log" 2>&1
  done
fi
if [ "$what" = report ] || [ "$what" = all ]; then
  "$bin" frontier --paired "$out/cfg1-seed1,$out/cfg1-seed2,$out/cfg1-seed3" --paired-speed "$out/speed-cfg1,$out/speed2-cfg1" \
    --reference-config target --paired-plot "$out/paired-cfg1.png" | tee "$out/paired-cfg1.md"
fi
