#!/usr/bin/env bash
# A throwaway PostgreSQL: initdb in DIR (trust auth, user postgres), serving on 127.0.0.1:PORT
# with its socket in DIR; `stop DIR` ends it. initdb and postgres refuse to run as root, so
# as root they run as the postgres user (which the Debian package creates).
#
# usage: bash scripts/ops/pgtmp.sh start DIR PORT | stop DIR
set -euo pipefail

pgbin() { # the newest installed PostgreSQL's programs (Debian keeps them out of PATH)
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  if [ -z "$d" ] && command -v initdb >/dev/null; then d="$(dirname "$(command -v initdb)")"; fi
  [ -n "$d" ] || { echo "pgtmp: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  echo "$d"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    dir="$2" port="$3" bin="$(pgbin)"
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1 ||
      { echo "pgtmp: initdb failed:" >&2; tail -5 "$dir/initdb.log" >&2; exit 1; }
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null ||
      { echo "pgtmp: postgres did not start:" >&2; tail -5 "$dir/postgres.log" >&2; exit 1; }
    ;;
  stop)
    dir="$2"
    [ -d "$dir/data" ] && as_pg "$(pgbin)/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
    ;;
  *) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
