#!/usr/bin/env bash
# A local cluster in one command: a throwaway PostgreSQL (initdb in a temporary folder,
# loopback port), a versitygw S3 server, and two marspec replicas on ports 8081 and 8082
# (one ONNX Runtime thread each) sharing them. `stop` ends what runs on the cluster's folder
# (found by command line at stop time, so a replica or versitygw restarted by hand goes too,
# and a recorded pid that has exited, or been reused, is never signalled) and removes it.
#
# usage: bash scripts/ops/cluster.sh start|stop     (make cluster / make cluster-stop)
#        bash scripts/ops/cluster.sh pid PORT       (the pid of the replica on PORT)
# needs: PostgreSQL's programs (Debian: apt-get install postgresql), go (versitygw is
# installed with go install when missing), bin/marspec (make build)
# ports: CLUSTER_PG_PORT (55432), CLUSTER_S3_PORT (7070); replicas 8081, 8082
# CLUSTER_STORE_DELAY (e.g. 1ms): the replicas reach PostgreSQL and S3 through
#   scripts/bench/latencyproxy, which holds every byte that long each way (ports +1), as if the
#   store were on another machine
# CLUSTER_BIN: the marspec binary the replicas run (default bin/marspec)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
state="$repo/out/cluster.dir" # holds the path of the running cluster's folder
pg_port="${CLUSTER_PG_PORT:-55432}"
s3_port="${CLUSTER_S3_PORT:-7070}"
delay="${CLUSTER_STORE_DELAY:-}"
bin="${CLUSTER_BIN:-$repo/bin/marspec}"

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

wait_for() { # wait_for WHAT LOG COMMAND...: retry for 30 s; on failure show LOG's end
  local what="$1" log="$2"; shift 2
  for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "cluster: $what did not come up within 30 s; the end of $log:" >&2
  tail -n 5 "$log" 2>/dev/null | sed 's/^/  /' >&2
  echo "cluster: make cluster-stop ends what did start and removes $dir" >&2
  exit 1
}

# listening PORT: the pid listening on 127.0.0.1:PORT, if any
listening() { ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }

cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | cut -c1-120; }

# check_ports: every port the cluster needs is free, or say which process holds it and how
# to free it, before anything starts
check_ports() {
  local busy=0 port pid
  for port in "$pg_port" "$s3_port" ${delay:+$((pg_port + 1)) $((s3_port + 1))} 8081 8082; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      pid="$(listening "$port")"
      echo "cluster: port $port is in use${pid:+ by pid $pid: $(cmdline "$pid")}" >&2
      busy=1
    fi
  done
  if [ "$busy" = 1 ]; then
    echo "cluster: stop what holds them (make cluster-stop, if it is a cluster of this repo), or move PostgreSQL and S3 with CLUSTER_PG_PORT / CLUSTER_S3_PORT" >&2
    exit 1
  fi
}

# is_pg PID: the process is PostgreSQL's (postgres itself or one of its workers)
is_pg() { case "$(cmdline "$1")" in */postgres\ * | postgres\ * | postgres:*) return 0 ;; esac; return 1; }

# on_folder: the pids whose command line names the cluster's folder (replicas, versitygw and
# PostgreSQL, however started)
on_folder() {
  local p
  for p in /proc/[0-9]*; do
    # a process may end between the listing and the read: its vanished file is no error
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/"; then echo "${p#/proc/}"; fi
  done
}

start() {
  if [ -f "$state" ]; then
    echo "cluster: already running in $(cat "$state") (make cluster-stop first)" >&2
    exit 1
  fi
  [ -x "$bin" ] || { echo "cluster: no $bin: build first (make build)" >&2; exit 1; }
  check_ports
  local gw
  gw="$(versitygw_bin)"
  dir="$(mktemp -d /tmp/marspec-cluster.XXXXXX)"
  chmod 755 "$dir"
  mkdir -p "$repo/out" && echo "$dir" > "$state"
  mkdir -p "$dir/s3"
  bash "$repo/scripts/ops/pgtmp.sh" start "$dir/pg" "$pg_port"
  "$gw" --access marspec --secret marspecsecret --port "127.0.0.1:$s3_port" posix "$dir/s3" >"$dir/versitygw.log" 2>&1 &
  wait_for "versitygw" "$dir/versitygw.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$s3_port"
  local to_pg="$pg_port" to_s3="$s3_port"
  if [ -n "$delay" ]; then # the replicas' store is one proxy away
    (cd "$repo" && go build -o "$dir/latencyproxy" ./scripts/bench/latencyproxy)
    to_pg=$((pg_port + 1)) to_s3=$((s3_port + 1))
    "$dir/latencyproxy" -listen "127.0.0.1:$to_pg" -to "127.0.0.1:$pg_port" -delay "$delay" >"$dir/proxy-pg.log" 2>&1 &
    "$dir/latencyproxy" -listen "127.0.0.1:$to_s3" -to "127.0.0.1:$s3_port" -delay "$delay" >"$dir/proxy-s3.log" 2>&1 &
    wait_for "the PostgreSQL proxy" "$dir/proxy-pg.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$to_pg"
    wait_for "the S3 proxy" "$dir/proxy-s3.log" bash -c "exec 3<>/dev/tcp/127.0.0.1/$to_s3"
  fi
  local store="postgres://postgres@127.0.0.1:$to_pg/postgres?sslmode=disable"
  local blobs="s3://marspec:marspecsecret@gallery?endpoint=http://127.0.0.1:$to_s3&region=us-east-1"
  for port in 8081 8082; do
    "$bin" serve --addr "127.0.0.1:$port" --threads 1 --store "$store" --blobs "$blobs" \
      --data-dir "$dir/data-$port" >"$dir/replica-$port.log" 2>&1 &
  done
  for port in 8081 8082; do wait_for "replica on $port" "$dir/replica-$port.log" curl -fs "http://127.0.0.1:$port/readyz"; done
  cat <<MSG
cluster: two replicas sharing one PostgreSQL and one S3 bucket
  gallery and API:  http://127.0.0.1:8081/   http://127.0.0.1:8082/   (either shows every job)
  PostgreSQL:       $store
  S3 (versitygw):   $blobs
  logs:             $dir/*.log${delay:+
  store delay:      $delay each way (PostgreSQL on $to_pg, S3 on $to_s3)}
  stop:             make cluster-stop
MSG
}

stop() {
  [ -f "$state" ] || { echo "cluster: not running"; return 0; }
  dir="$(cat "$state")"
  local pid left
  # replicas and versitygw first (found now, by folder: never a pid recorded earlier), then
  # PostgreSQL by pg_ctl, then whatever still names the folder
  for pid in $(on_folder); do
    is_pg "$pid" || kill "$pid" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    left="$(on_folder | while read -r p; do is_pg "$p" || echo "$p"; done)"
    [ -z "$left" ] && break
    sleep 0.2
  done
  [ -d "$dir/pg" ] && bash "$repo/scripts/ops/pgtmp.sh" stop "$dir/pg"
  for pid in $(on_folder); do
    echo "cluster: pid $pid did not stop; killing it: $(cmdline "$pid")" >&2
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir" "$state"
  echo "cluster: stopped"
}

# replica_pid PORT: the pid of the running cluster's replica serving on PORT (for benchmarks
# that pause one), found by command line like everything else here
replica_pid() {
  [ -f "$state" ] || { echo "cluster: not running" >&2; exit 1; }
  dir="$(cat "$state")"
  local p
  for p in $(on_folder); do
    case "$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)" in *" serve --addr 127.0.0.1:$1 "*) echo "$p"; return ;; esac
  done
  echo "cluster: no replica serving on port $1" >&2
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  pid) replica_pid "${2:?usage: $0 pid PORT}" ;;
  *) echo "usage: $0 start|stop|pid PORT" >&2; exit 2 ;;
esac
