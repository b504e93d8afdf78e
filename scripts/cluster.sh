#!/usr/bin/env bash
# A local cluster in one command: a throwaway PostgreSQL (initdb in a temporary folder,
# loopback port), a versitygw S3 server, and two marspec replicas on ports 8081 and 8082
# (one ONNX Runtime thread each) sharing them. `stop` ends exactly the processes `start`
# recorded and removes the folder.
#
# usage: bash scripts/cluster.sh start|stop     (make cluster / make cluster-stop)
# needs: PostgreSQL's programs (Debian: apt-get install postgresql), go (versitygw is
# installed with go install when missing), bin/marspec (make build)
# ports: CLUSTER_PG_PORT (55432), CLUSTER_S3_PORT (7070); replicas 8081, 8082
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
state="$repo/out/cluster.dir" # holds the path of the running cluster's folder
pg_port="${CLUSTER_PG_PORT:-55432}"
s3_port="${CLUSTER_S3_PORT:-7070}"

versitygw_bin() {
  if command -v versitygw >/dev/null; then command -v versitygw; return; fi
  local p
  p="$(go env GOPATH)/bin/versitygw"
  if [ ! -x "$p" ]; then
    echo "cluster: installing versitygw (about 1.5 min)" >&2
    go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
  fi
  echo "$p"
}

wait_for() { # wait_for WHAT COMMAND...: retry for 30 s
  local what="$1"; shift
  for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "cluster: $what did not come up; logs in $dir" >&2
  exit 1
}

start() {
  if [ -f "$state" ]; then
    echo "cluster: already running in $(cat "$state") (make cluster-stop first)" >&2
    exit 1
  fi
  [ -x "$repo/bin/marspec" ] || { echo "cluster: build first (make build)" >&2; exit 1; }
  local gw
  gw="$(versitygw_bin)"
  dir="$(mktemp -d /tmp/marspec-cluster.XXXXXX)"
  chmod 755 "$dir"
  mkdir -p "$repo/out" && echo "$dir" > "$state"
  mkdir -p "$dir/s3"
  bash "$repo/scripts/pgtmp.sh" start "$dir/pg" "$pg_port"
  echo "pg $dir/pg" >> "$dir/procs"
  "$gw" --access marspec --secret marspecsecret --port "127.0.0.1:$s3_port" posix "$dir/s3" >"$dir/versitygw.log" 2>&1 &
  echo "pid $!" >> "$dir/procs"
  wait_for "versitygw" bash -c "exec 3<>/dev/tcp/127.0.0.1/$s3_port"
  local store="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
  local blobs="s3://marspec:marspecsecret@gallery?endpoint=http://127.0.0.1:$s3_port&region=us-east-1"
  for port in 8081 8082; do
    "$repo/bin/marspec" serve --addr "127.0.0.1:$port" --threads 1 --store "$store" --blobs "$blobs" \
      --data-dir "$dir/data-$port" >"$dir/replica-$port.log" 2>&1 &
    echo "pid $! replica-$port" >> "$dir/procs"
  done
  for port in 8081 8082; do wait_for "replica on $port" curl -fs "http://127.0.0.1:$port/readyz"; done
  cat <<MSG
cluster: two replicas sharing one PostgreSQL and one S3 bucket
  gallery and API:  http://127.0.0.1:8081/   http://127.0.0.1:8082/   (either shows every job)
  PostgreSQL:       $store
  S3 (versitygw):   $blobs
  logs:             $dir/*.log
  stop:             make cluster-stop
MSG
}

stop() {
  [ -f "$state" ] || { echo "cluster: not running"; return 0; }
  dir="$(cat "$state")"
  if [ -f "$dir/procs" ]; then
    # replicas and versitygw by the pids recorded at start, newest first; PostgreSQL by pg_ctl
    tac "$dir/procs" | while read -r kind a _; do
      case "$kind" in
        pid) kill "$a" 2>/dev/null || true; for _ in $(seq 50); do kill -0 "$a" 2>/dev/null || break; sleep 0.2; done ;;
        pg) bash "$repo/scripts/pgtmp.sh" stop "$a" ;;
      esac
    done
  fi
  rm -rf "$dir" "$state"
  echo "cluster: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
