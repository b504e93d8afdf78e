#!/usr/bin/env bash
# int8 on the frontier again, for the presets the embedded pack ships (docs/FRONTIER.md,
# "Does int8 cost quality?"): fast, balanced and quality as frontier configurations at
# --precision int8 (a process-wide setting, so they run in frontier runs of their own), CFG 1,
# N images per configuration at seeds 1, 2 and 3, two lanes (one per core), nice 19, one ONNX thread;
# paired against the same configurations at fp32 and the same seed in docs/results/2026-11-26-head-tuned-at-t09.
# Then the speeds on the machine left quiet: N_SPEED images per configuration, seed 7, the int8 and
# the fp32 run at once (one per core), each with the one-token-per-step target at its own precision.
# usage: make build && bash scripts/bench/int8_presets.sh [all|report] [N=2000] [OUT=runs/int8-presets] [N_SPEED=320]
#   report: the table only, from OUT's frontier.json files (e.g. the committed docs/results/2026-11-26-int8-presets)
set -euo pipefail
cd "$(dirname "$0")/../.."
what="${1:-all}"; n="${2:-2000}"; out="${3:-runs/int8-presets}"; n_speed="${4:-320}"
bin="${MARSPEC:-./bin/marspec}"
. scripts/bench/tuned_presets.sh # fast, balanced, quality
configs="$fast,$balanced,$quality"
mkdir -p "$out"
fid_run() { # seed
  nice -n 19 "$bin" frontier --precision int8 --out "$out/int8-cfg1-seed$1" --n "$n" --cfg 1 --seed "$1" \
    --threads 1 --quiet --reference-config "$balanced" --configs "$configs" >"$out/int8-cfg1-seed$1.log" 2>&1
}
speed_run() { # precision
  "$bin" frontier --precision "$1" --out "$out/speed-$1-cfg1" --n "$n_speed" --cfg 1 --seed 7 --threads 1 --quiet \
    --reference-config target --configs "$configs,target" >"$out/speed-$1-cfg1.log" 2>&1
}
if [ "$what" = all ]; then
  (fid_run 1; fid_run 3) & lane_a=$!
  (fid_run 2) & lane_b=$!
  wait $lane_a $lane_b
  speed_run int8 & speed_run fp32 & wait
fi
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = lambda p: {r["config"]: r for r in json.load(open(p + "/frontier.json"))["results"] if "@" not in r["name"]}
speed = {p: rows(f"{out}/speed-{p}-cfg1") for p in ("int8", "fp32")}
ref = {p: speed[p]["target"]["images_per_second"] for p in speed}
print("| configuration | int8 − fp32 FID, seeds 1 / 2 / 3 | mean | int8 / fp32 images/s | int8 vs the fp32 target |")
print("|---|---|---|---|---|")
int8 = [rows(f"{out}/int8-cfg1-seed{s}") for s in (1, 2, 3)]
fp32 = [rows(f"docs/results/2026-11-26-head-tuned-at-t09/cfg1-seed{s}") for s in (1, 2, 3)]
for c in int8[0]:
    d = [i[c]["fid"] - f[c]["fid"] for i, f in zip(int8, fp32)]
    i8, f32 = speed["int8"][c]["images_per_second"], speed["fp32"][c]["images_per_second"]
    print(f"| {c} | {' / '.join(f'{x:+.2f}' for x in d)} | {sum(d) / 3:+.2f} | {i8 / f32:.2f}x | {i8 / ref['fp32']:.1f}x |")
print(f"one-token-per-step target: int8 {ref['int8']:.2f}, fp32 {ref['fp32']:.2f} images/s")
PY
