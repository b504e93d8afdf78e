#!/usr/bin/env bash
# Runs the README's commands as a newcomer would, on this checkout, so a README command that
# stops working fails CI (.ci/run). Quick commands run exactly as written, in a fresh folder
# (so out/ and runs/ start empty, as on a new clone); the long ones (bench --spec, eval and
# frontier at N = 2,000) run with the same flags at reduced size, and the time of each is
# printed, so the README's "how long" figures can be checked against this machine.
#
# usage: bash scripts/ops/readme_check.sh   (after make build; make demo runs first)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$repo/bin/marspec"
cd "$repo"

step() { # step NAME COMMAND...: run, time, and stop with the command on failure
  local name="$1"; shift
  local start=$SECONDS
  if ! "$@" > "$work/log.txt" 2>&1; then
    echo "readme_check: FAILED: $name: $*" >&2
    tail -20 "$work/log.txt" >&2
    exit 1
  fi
  printf 'readme_check: ok %4ds  %s\n' $((SECONDS - start)) "$name"
}

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# make demo from the checkout, as the README's quick start has it
rm -rf out/demo out/demo-grid.png
step "make demo" make demo
test -s out/demo-grid.png || { echo "readme_check: make demo wrote no out/demo-grid.png" >&2; exit 1; }

# the README's commands run from a fresh folder beside the embedded packs' files
mkdir -p "$work/run/bin"
ln -s "$bin" "$work/run/bin/marspec"
ln -s "$repo/models" "$work/run/models"
cd "$work/run"

# every `./bin/marspec ...` line of the README, its comment cut off
mapfile -t commands < <(grep -E '^\./bin/marspec ' "$repo/README.md" | sed -e 's/[[:space:]]\{2,\}#.*$//' -e 's/[[:space:]]*$//')
[ ${#commands[@]} -ge 15 ] || { echo "readme_check: found only ${#commands[@]} README commands" >&2; exit 1; }

# reduced sizes for the long ones: the same command and flags, fewer images or settings
reduce() {
  case "$1" in
    *"bench --spec"*) echo "$1 --spec-images 2 --batches 1 --gammas 4 --prefills 0.05 --verifies prefix --acceptances exact --schedules batched" ;;
    *"bench --profile"*) echo "$1 --images 4" ;;
    *"eval --out"*) echo "${1/--n 2000/--n 20} --chunk 10 --configs target,spec:verify=group" ;;
    *"frontier --out"*) echo "${1/--n 2000/--n 20} --chunk 10 --configs target,target:num_iter=4" ;;
    *) echo "$1" ;;
  esac
}

remote=()
for c in "${commands[@]}"; do
  case "$c" in
    *"--server "*|*"loadtest"*) remote+=("$c"); continue ;; # need a server: below
  esac
  r="$(reduce "$c")"
  # shellcheck disable=SC2086 # the README's words, split as a shell splits them
  step "$r" $r
done

# `make run`'s server, then the commands that talk to it and the README's curl calls
./bin/marspec serve --addr 127.0.0.1:18080 --data-dir "$work/data" > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:18080/healthz > /dev/null 2>&1 && break
  sleep 0.2
done
curl -sf http://127.0.0.1:18080/healthz > /dev/null || { echo "readme_check: serve did not come up" >&2; cat "$work/serve.log" >&2; exit 1; }
job="$(curl -s -X POST 'http://127.0.0.1:18080/v1/generations?wait=60s' -H 'Content-Type: application/json' \
     -d '{"class":"sneaker","n":4,"preset":"fast"}')"
grep -q '"status":"succeeded"' <<< "$job" || { echo "readme_check: POST did not succeed: $job" >&2; exit 1; }
echo "readme_check: ok        curl POST /v1/generations (preset fast)"
# the OpenAI-compatible call; its answer is decoded here by python3 where the README pipes it to jq
curl -s http://127.0.0.1:18080/openai/v1/images/generations -H 'Content-Type: application/json' \
     -d '{"prompt": "sneaker", "n": 4}' > "$work/openai.json"
/usr/bin/python3 -c 'import base64, json, sys; png = base64.b64decode(json.load(open(sys.argv[1]))["data"][0]["b64_json"]); assert png[:8] == b"\x89PNG\r\n\x1a\n"' "$work/openai.json" ||
  { echo "readme_check: POST /openai/v1/images/generations gave no PNG: $(head -c 300 "$work/openai.json")" >&2; exit 1; }
echo "readme_check: ok        curl POST /openai/v1/images/generations"
for c in "${remote[@]}"; do
  c="${c//127.0.0.1:8080/127.0.0.1:18080}"
  case "$c" in
    *loadtest*) c="$c --server http://127.0.0.1:18080 --requests 8 --clients 2" ;;
  esac
  # shellcheck disable=SC2086
  step "$c" $c
done
test -s out/remote-grid.png || { echo "readme_check: generate --server wrote no out/remote-grid.png" >&2; exit 1; }
echo "readme_check: every README command ran"
