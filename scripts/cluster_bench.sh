#!/usr/bin/env bash
# Throughput and latency of one replica against two, on the cluster `make cluster` started:
# REQUESTS requests of 3 images (the service's default request), CLIENTS at once, each a
# POST with ?wait=60s. "one" is the cluster with replica 8082 paused (SIGSTOP: it claims
# nothing), "two→A" posts everything to 8081 (the shared queue spreads it), "two rr" posts
# round-robin; the three alternate for ROUNDS rounds so drift in the machine's load cancels.
#
# usage: make cluster && bash scripts/cluster_bench.sh [REQUESTS=120] [CLIENTS=8] [ROUNDS=2]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-120}" clients="${2:-8}" rounds="${3:-2}"
[ -f "$repo/out/cluster.dir" ] || { echo "cluster_bench: no cluster (make cluster)" >&2; exit 1; }
pid="$(awk '$3 == "replica-8082" {print $2}' "$(cat "$repo/out/cluster.dir")/procs")"
[ -n "$pid" ] && kill -0 "$pid" || { echo "cluster_bench: replica 8082 is not running" >&2; exit 1; }
trap 'kill -CONT "$pid" 2>/dev/null || true' EXIT
out="$(mktemp)"

pass() { # pass NAME URL...: one pass, one line of results
  local name="$1"; shift
  local urls=("$@") t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 0 $((n - 1))); do echo "$i ${urls[$((i % ${#urls[@]}))]}"; done |
    xargs -P "$clients" -n 2 sh -c 'curl -s -o /dev/null -w "%{http_code} %{time_total}\n" -X POST \
      "$1/v1/generations?wait=60s" -d "{\"class\":[\"$(($0 % 10))\"],\"n\":3,\"seed\":$0}"' > "$out"
  t1=$(date +%s.%N)
  python3 - "$name" "$t0" "$t1" "$n" "$out" <<'PY'
import sys
name, t0, t1, n, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rows = [l.split() for l in open(path)]
bad = sum(1 for c, _ in rows if c != "200")
lat = sorted(float(t) for _, t in rows)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{name:8} {3 * n / (t1 - t0):7.1f} images/s  p50 {q(0.5):.2f} s  p99 {q(0.99):.2f} s  wall {t1 - t0:.1f} s  not 200: {bad}")
PY
}

for _ in $(seq "$rounds"); do
  kill -STOP "$pid"; sleep 0.5
  pass "one" http://127.0.0.1:8081
  kill -CONT "$pid"; sleep 1.5
  pass "two→A" http://127.0.0.1:8081
  pass "two rr" http://127.0.0.1:8081 http://127.0.0.1:8082
done
rm -f "$out"
