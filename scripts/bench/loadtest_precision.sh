#!/usr/bin/env bash
# The default request (preset fast) under load at fp32 (cross-request batching) and at int8 (each
# job in an engine of its own: int8 rows depend on their batch-mates), docs/BENCHMARKS.md,
# "Precision per request". In-process server on the embedded packs, cross-request batching on,
# CLIENTS clients, REQUESTS requests of 2 to 4 images per pass, passes in the order
# fp32, int8, int8, fp32 (drift cancels), one ONNX thread.
# usage: make build && bash scripts/bench/loadtest_precision.sh [OUT=runs/loadtest-precision] [CLIENTS=8] [REQUESTS=400]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-runs/loadtest-precision}"; clients="${2:-8}"; requests="${3:-400}"
bin="${MARSPEC:-./bin/marspec}"
mkdir -p "$out"
i=0
for p in fp32 int8 int8 fp32; do
  i=$((i + 1))
  "$bin" loadtest --cross-batch on --threads 1 --clients "$clients" --requests "$requests" --precision "$p" \
    --json "$out/pass$i-$p.json" >"$out/pass$i-$p.txt" 2>&1
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/pass*.json")):
    p = f.rsplit("-", 1)[1][:-5]
    rows.setdefault(p, []).append(json.load(open(f))[0])  # loadtest --json: one result per pass
mean = lambda p, k: sum(r[k] for r in rows[p]) / len(rows[p])
print("| precision | images/s (two passes) | p50 / p95 latency, s | mean batch (images) |")
print("|---|---|---|---|")
for p in ("fp32", "int8"):
    ips = " / ".join(f"{r['images_per_second']:.1f}" for r in rows[p])
    print(f"| {p} | {ips} | {mean(p, 'latency_p50_seconds'):.3f} / {mean(p, 'latency_p95_seconds'):.3f} | {mean(p, 'mean_batch_images'):.1f} |")
print(f"int8 / fp32 images/s: {mean('int8', 'images_per_second') / mean('fp32', 'images_per_second'):.2f}x")
PY
