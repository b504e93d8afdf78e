#!/usr/bin/env bash
# The default request under load from two builds of marspec, side by side: each pass is one
# build at one ONNX thread count, the passes alternate builds (A B B A per thread count, so
# drift cancels), and the table gives images/s, latency and the mean batch per engine step
# (docs/BENCHMARKS.md, "The service under load"). In-process server on the embedded packs,
# cross-request batching on, int8 (the default preset's precision on a CPU), CLIENTS clients,
# REQUESTS requests of 2 to 4 images.
# usage: bash scripts/bench/loadtest_two_builds.sh BIN_A BIN_B [OUT=runs/loadtest-builds] [CLIENTS=32] [REQUESTS=400] [THREADS="0 1"]
#   e.g. a build of the commit before int8 jobs merged: git worktree add /tmp/old 2979e2c &&
#   (cd /tmp/old && go build -o /tmp/marspec-old ./cmd/marspec)
set -euo pipefail
cd "$(dirname "$0")/../.."
a="$1"; b="$2"; out="${3:-runs/loadtest-builds}"; clients="${4:-32}"; requests="${5:-400}"; threads="${6:-0 1}"
mkdir -p "$out"
for t in $threads; do
  i=0
  for which in A B B A; do
    i=$((i + 1)); bin=$a; [ $which = B ] && bin=$b
    "$bin" loadtest --cross-batch on --threads "$t" --clients "$clients" --requests "$requests" --precision int8 \
      --json "$out/t$t-pass$i-$which.json" >"$out/t$t-pass$i-$which.txt" 2>&1
  done
done
/usr/bin/python3 - "$out" "$a" "$b" <<'PY'
import glob, json, sys
out, names = sys.argv[1], {"A": sys.argv[2], "B": sys.argv[3]}
print(f"A = {names['A']}, B = {names['B']}")
print("| build | ONNX threads | images/s (two passes) | p50 / p95 latency, s | mean batch (images per engine step) |")
print("|---|---|---|---|---|")
rows = {}
for f in sorted(glob.glob(out + "/t*-pass*.json")):
    t, _, which = f.rsplit("/", 1)[1][:-5].split("-")
    rows.setdefault((t[1:], which), []).append(json.load(open(f))[0])
for (t, which), rs in sorted(rows.items()):
    mean = lambda k: sum(r[k] for r in rs) / len(rs)
    ips = " / ".join(f"{r['images_per_second']:.1f}" for r in rs)
    print(f"| {which} | {t} | {ips} | {mean('latency_p50_seconds'):.3f} / {mean('latency_p95_seconds'):.3f} | {mean('mean_batch_images'):.1f} |")
PY
