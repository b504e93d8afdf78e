#!/usr/bin/env bash
# One full-size image through the service (docs/BENCHMARKS.md, "Real size (CPU): MAR-B through
# serve"): start `marspec serve` on TARGET and DRAFT with one thread, time start-up to the first
# answer of /healthz (the packs are opened before the server answers), POST one image in target
# mode and one in spec mode with ?wait, and print each job's server-measured seconds, the
# client's wall time, the PNG's size and the server's memory (VmHWM: peak resident set; VmRSS:
# now) from /proc. The server is stopped at the end, whatever happens.
# usage: make build && bash scripts/bench/serve_fullsize.sh TARGET DRAFT [CLASS=207] [STEPS=3] [NUM_ITER=4] [GAMMA=4]
set -euo pipefail
cd "$(dirname "$0")/../.."
target="$1" draft="$2" class="${3:-207}" steps="${4:-3}" num_iter="${5:-4}" gamma="${6:-4}"
addr=127.0.0.1:${MARSPEC_PORT:-18930}
data="${MARSPEC_DATA:-$(mktemp -d)}"  # kept: serve it again to look at the gallery
mkdir -p "$data"
log="$data/serve.log"
if curl -sf "http://$addr/healthz" > /dev/null; then
  echo "something already answers on $addr (set MARSPEC_PORT)"; exit 1
fi
start=$(date +%s.%N)
./bin/marspec serve --target "$target" --draft "$draft" --threads 1 --data-dir "$data" --addr "$addr" \
  --max-wait 30m --write-timeout 31m > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; echo "server log: $log"' EXIT
until curl -sf "http://$addr/healthz" > /dev/null; do
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
ready=$(date +%s.%N)
echo "start-up to ready: $(python3 -c "print(f'{$ready-$start:.1f}')") s"
mem() { grep -E '^(VmHWM|VmRSS)' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' '; echo; }
echo "memory after start-up: $(mem)"

# post BODY: one job, waited for; prints its status, seconds and image, and checks the PNG
post() {
  local t0 t1 job url
  t0=$(date +%s.%N)
  job=$(curl -sS -X POST "http://$addr/v1/generations?wait=30m" -H 'Content-Type: application/json' -d "$1")
  t1=$(date +%s.%N)
  echo "$1 -> $(jq -c '{status, error, seconds, mode: .settings.mode, class: .images[0].class_name, alpha}' <<< "$job")," \
    "wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s"
  url=$(jq -r '.images[0].url // empty' <<< "$job")
  [ -n "$url" ] || { echo "no image"; return 1; }
  curl -sS -o "$data/last.png" "http://$addr$url"
  echo "  $url: $(file -b "$data/last.png" | cut -d, -f1-3)"
  echo "  memory: $(mem)"
}
# cfg 1 pinned: a MAR pack's own default is its published guidance (2.9 for MAR-B), and the
# numbers in docs/BENCHMARKS.md were measured unguided
post "{\"class\": $class, \"n\": 1, \"mode\": \"target\", \"num_iter\": $num_iter, \"steps\": $steps, \"cfg\": 1, \"seed\": 1}"
post "{\"class\": $class, \"n\": 1, \"mode\": \"spec\", \"steps\": $steps, \"gamma\": $gamma, \"cfg\": 1, \"seed\": 1}"
echo "jobs listed: $(curl -sS "http://$addr/v1/generations" | jq '.total')"
