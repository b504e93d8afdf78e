#!/usr/bin/env bash
# One replica of the local cluster (PostgreSQL and S3, `scripts/ops/cluster.sh`) from two builds
# of marspec, side by side, with the store DELAY away (each way, through
# scripts/bench/latencyproxy; 0 for none): each pass starts a fresh cluster running one build,
# pauses replica 8082 (SIGSTOP), loads 8081 with `marspec loadtest` (requests of 3 images, the
# default request) and stops the cluster; passes go A B B A per round so drift hits both alike.
# The load generator is build A in every pass. Rows go to OUT/rows.md and standard output.
#
# usage: bash scripts/bench/cluster_two_builds.sh BIN_A BIN_B [DELAY=1ms] [REQUESTS=480] [CLIENTS=32] [ROUNDS=2] [OUT=runs/cluster-builds]
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
a="$(realpath "$1")" b="$(realpath "$2")" delay="${3:-1ms}" n="${4:-480}" clients="${5:-32}" rounds="${6:-2}"
out="${7:-runs/cluster-builds}"
[ "$delay" = 0 ] && delay=""
mkdir -p "$out"
[ -f "$repo/out/cluster.dir" ] && { echo "cluster_two_builds: a cluster is running (make cluster-stop)" >&2; exit 1; }
trap 'bash "$repo/scripts/ops/cluster.sh" stop >/dev/null 2>&1 || true' EXIT

echo "A = $a, B = $b, store delay ${delay:-none} each way, $clients clients, $n requests of 3 images" | tee "$out/rows.md"
echo "| build | requests | images | seconds | images/s | requests/s | p50 s | p95 s | p99 s | mean batch | 503s |" | tee -a "$out/rows.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|" | tee -a "$out/rows.md"
for _ in $(seq "$rounds"); do
  for which in A B B A; do
    bin=$a; [ "$which" = B ] && bin=$b
    CLUSTER_BIN="$bin" CLUSTER_STORE_DELAY="$delay" bash "$repo/scripts/ops/cluster.sh" start >/dev/null
    pid="$(bash "$repo/scripts/ops/cluster.sh" pid 8082)"
    kill -STOP "$pid"; sleep 0.5
    row="$("$a" loadtest --server http://127.0.0.1:8081 --clients "$clients" --requests "$n" --images 3 --seed 1 | grep '^| server')" ||
      { echo "cluster_two_builds: loadtest failed (build $which)" >&2; exit 1; }
    kill -CONT "$pid"
    bash "$repo/scripts/ops/cluster.sh" stop >/dev/null
    echo "| $which ${row#| server\'s setting }" | tee -a "$out/rows.md"
  done
done
