#!/usr/bin/env bash
# Throughput and latency of one replica against two, on the cluster `make cluster` started,
# measured by `marspec loadtest` (which also checks every job completed exactly once, summing
# the replicas' counters). "one" is the cluster with replica 8082 paused (SIGSTOP: it claims
# nothing), "two" posts round-robin to 8081 and 8082 (the shared queue spreads the work
# anyway); they alternate for ROUNDS rounds so drift in the machine's load hits both alike.
#
# usage: make cluster && bash scripts/bench/cluster_bench.sh [REQUESTS=120] [CLIENTS=8] [ROUNDS=3]
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
n="${1:-120}" clients="${2:-8}" rounds="${3:-3}"
[ -f "$repo/out/cluster.dir" ] || { echo "cluster_bench: no cluster (make cluster)" >&2; exit 1; }
pid="$(bash "$repo/scripts/ops/cluster.sh" pid 8082)" || true
[ -n "$pid" ] && kill -0 "$pid" || { echo "cluster_bench: replica 8082 is not running" >&2; exit 1; }
trap 'kill -CONT "$pid" 2>/dev/null || true' EXIT

pass() { # pass NAME SERVERS: one loadtest pass, its table row
  local row
  row="$("$repo/bin/marspec" loadtest --server "$2" --clients "$clients" --requests "$n" --images 3 --seed 1 |
    grep '^| server' )" || { echo "cluster_bench: loadtest failed ($1)" >&2; exit 1; }
  echo "| $1 ${row#| server\'s setting }"
}

echo "| replicas | requests | images | seconds | images/s | requests/s | p50 s | p95 s | p99 s | mean batch | 503s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for _ in $(seq "$rounds"); do
  kill -STOP "$pid"; sleep 0.5
  pass "one" http://127.0.0.1:8081
  kill -CONT "$pid"; sleep 1.5
  pass "two" http://127.0.0.1:8081,http://127.0.0.1:8082
done
