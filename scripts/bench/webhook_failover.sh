#!/usr/bin/env bash
# Webhooks survive kill -9 of the replica delivering them (with real processes):
# a cluster of two replicas (scripts/ops/cluster.sh) with webhooks to a loopback receiver
# (webhook_receiver.py, which checks every signature as docs/api.md says and holds the first
# "started" call open); a job is posted, the replica holding that call is killed with -9, and
# the other must deliver "started" with the same bytes, then "succeeded".
#
# usage: bash scripts/bench/webhook_failover.sh     (needs bin/marspec: make build)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
work="$(mktemp -d)"
export WEBHOOK_CALLS="$work/calls.jsonl" WEBHOOK_SECRET=failover-check-secret-0123
python3 scripts/bench/webhook_receiver.py 9099 >"$work/receiver.log" 2>&1 &
receiver=$!
cleanup() { kill "$receiver" 2>/dev/null || true; bash scripts/ops/cluster.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
MARSPEC_WEBHOOK_SECRET=$WEBHOOK_SECRET MARSPEC_WEBHOOK_HOSTS=127.0.0.1:9099 MARSPEC_WEBHOOK_TIMEOUT=5s \
  bash scripts/ops/cluster.sh start >/dev/null
id=$(curl -sf -X POST localhost:8082/v1/generations -H 'Content-Type: application/json' \
  -d '{"class":3,"n":48,"preset":"balanced","webhook":"http://127.0.0.1:9099/hook"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 200); do grep -q '"held"' "$WEBHOOK_CALLS" 2>/dev/null && break; sleep 0.05; done
pid=$(ss -tnpH 'dport = :9099' | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
[ -n "$pid" ] || { echo "webhook_failover: no replica is holding the started call"; exit 1; }
owner=$(tr '\0' ' ' <"/proc/$pid/cmdline" | grep -o '127.0.0.1:808[12]')
kill -9 "$pid"
echo "job $id: killed the replica on $owner (pid $pid) while it delivered \"started\" at $(date +%s.%N)"
other=8081; [ "$owner" = 127.0.0.1:8081 ] && other=8082
for _ in $(seq 120); do grep -q '"succeeded"' "$WEBHOOK_CALLS" && break; sleep 0.5; done
cat "$WEBHOOK_CALLS"
python3 - "$WEBHOOK_CALLS" <<'PY'
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
started = [c for c in calls if c["event"] == "started"]
ok = (len(started) >= 2 and all(c["ok"] for c in calls) and len({c["sha"] for c in started}) == 1
      and any(c["event"] == "succeeded" for c in calls))
gap = started[1]["at"] - started[0]["at"] if len(started) > 1 else float("nan")
print(("PASS" if ok else "FAIL") + f": {len(calls)} calls, every signature valid: {all(c['ok'] for c in calls)}; "
      f"'started' again after {gap:.1f} s with the same body: {len({c['sha'] for c in started}) == 1}; "
      f"'succeeded' delivered: {any(c['event'] == 'succeeded' for c in calls)}")
sys.exit(0 if ok else 1)
PY
curl -sf "localhost:$other/v1/generations/$id" | python3 -c 'import json,sys; g=json.load(sys.stdin); print("job", g["status"], len(g["images"]), "images; deliveries", json.dumps(g["webhook"]["deliveries"]))'
