#!/usr/bin/env bash
# The container image: build it, and prove the server, the CLI and a replica pair from it.
#
#   bash scripts/ops/image.sh build      build marspec:TAG and marspec:latest (make image)
#   bash scripts/ops/image.sh check      build, then run the checks below (make image-check; CI)
#   bash scripts/ops/image.sh push REGISTRY   tag the built image REGISTRY/marspec:TAG and :latest and
#                                             push both (TAG: `git describe --tags --always --dirty`)
#
# Engine: docker when its daemon answers, else podman (with runc, and rlimits this machine's
# podman accepts). Bases: the Dockerfile's public defaults when they can be pulled; else local
# ones made here from Debian's packages with mmdebstrap (a build base with npm, gcc, make and
# this machine's Go; a runtime base), passed as build arguments. A fetching build step trusts
# this machine's CA bundle, mounted at /run/host-ca.crt (a TLS-inspecting proxy's CA is there).
#
# The checks: the server starts and the image's own HEALTHCHECK reports healthy; a POST makes a
# PNG; the container stops and starts on the same volume and the gallery still has the job; it
# runs as the non-root user with a read-only root file system where only /data (and the
# engine's tmpfs /tmp) can be written; `generate` and `fid` run from the image; two containers
# share a PostgreSQL and an S3 server (versitygw) and jobs posted to one finish, read from
# either. Needs for `check`: PostgreSQL (MARSPEC_TEST_POSTGRES, else 127.0.0.1:5432 as
# postgres) and versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-build}
case "$mode" in build | check | push) ;; *) echo "image.sh: unknown mode $mode (allowed: build, check, push)" >&2; exit 2 ;; esac

tag=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
image=${IMAGE:-marspec}
work=$(mktemp -d)
containers=()
cleanup() {
  for c in "${containers[@]}"; do $engine rm -f "$c" >/dev/null 2>&1 || true; done
  [ -n "${gw_pid:-}" ] && kill "$gw_pid" 2>/dev/null || true
  if [ -n "${volume:-}" ]; then
    for v in "$volume" "$volume-1" "$volume-2"; do $engine volume rm -f "$v" >/dev/null 2>&1 || true; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
say() { echo "image.sh: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

# ---- engine ----
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
  run_opts=()
  build_opts=()
elif command -v podman >/dev/null; then
  engine=podman
  # crun refuses this kind of machine's hybrid cgroups and podman's default rlimits are refused
  # here; runc with explicit limits works (and works elsewhere too)
  run_opts=(--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
  # docker format: the OCI one has no HEALTHCHECK
  build_opts=(--format docker --runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
else
  fail "neither a docker daemon nor podman is here (apt-get install podman runc mmdebstrap)"
fi
say "engine: $engine"

if [ "$mode" = push ]; then
  registry=${2:?usage: image.sh push REGISTRY (e.g. ghcr.io/ORG)}
  $engine image inspect "$image:$tag" >/dev/null 2>&1 || fail "$image:$tag is not built: make image first"
  for t in "$tag" latest; do
    $engine tag "$image:$tag" "$registry/$image:$t"
    $engine push "$registry/$image:$t"
  done
  say "pushed $registry/$image:$tag and $registry/$image:latest"
  exit 0
fi

# ---- bases ----
build_args=()
if ! timeout 60 $engine pull -q docker.io/library/debian:bookworm-slim >/dev/null 2>&1; then
  command -v mmdebstrap >/dev/null || fail "the public base images cannot be pulled and mmdebstrap is missing (apt-get install mmdebstrap)"
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  mirror=${mirror:-http://deb.debian.org/debian}
  go_root=$(go env GOROOT 2>/dev/null) || fail "the local build base copies this machine's Go, and there is none"
  if ! $engine image exists localhost/marspec-base-build:bookworm 2>/dev/null && ! $engine image inspect localhost/marspec-base-build:bookworm >/dev/null 2>&1; then
    say "public bases unreachable: making localhost/marspec-base-build from Debian's packages ($mirror) and $go_root"
    mmdebstrap --variant=minbase --quiet --include=ca-certificates,npm,gcc,libc6-dev,make \
      --customize-hook="tar -C '$go_root/..' -cf - '$(basename "$go_root")' | tar -C \"\$1/usr/local\" -xf -" \
      bookworm "$work/build.tar" "$mirror"
    $engine import -q --change "ENV PATH=/usr/local/$(basename "$go_root")/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      "$work/build.tar" localhost/marspec-base-build:bookworm >/dev/null
    rm -f "$work/build.tar"
  fi
  if ! $engine image inspect localhost/marspec-base-runtime:bookworm >/dev/null 2>&1; then
    say "making localhost/marspec-base-runtime from Debian's packages"
    mmdebstrap --variant=minbase --quiet bookworm "$work/runtime.tar" "$mirror"
    $engine import -q "$work/runtime.tar" localhost/marspec-base-runtime:bookworm >/dev/null
    rm -f "$work/runtime.tar"
  fi
  build_args=(--build-arg NODE_IMAGE=localhost/marspec-base-build:bookworm --build-arg GO_IMAGE=localhost/marspec-base-build:bookworm
    --build-arg RUNTIME_IMAGE=localhost/marspec-base-runtime:bookworm)
fi

# ---- build ----
ca=/etc/ssl/certs/ca-certificates.crt
mounts=()
[ -s "$ca" ] && mounts=(-v "$ca:/run/host-ca.crt:ro")
[ $engine = docker ] && mounts=() # docker build has no -v; it uses the daemon's trust
start=$(date +%s)
$engine build "${build_opts[@]}" "${mounts[@]}" --network host "${build_args[@]}" -t "$image:$tag" -t "$image:latest" . >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; fail "the build failed (its last lines are above)"; }
build_seconds=$(($(date +%s) - start))
size=$($engine image inspect --format '{{.Size}}' "$image:$tag")
say "built $image:$tag in ${build_seconds} s; $((size / 1000000)) MB"
[ "$mode" = build ] && exit 0

# ---- checks ----
port=${IMAGE_CHECK_PORT:-18180}
url=http://127.0.0.1:$port
volume=marspec-image-check-$$
$engine volume create "$volume" >/dev/null
serve() { # NAME: the image's own command (serve) on $port with the check volume, read-only root
  containers+=("$1")
  $engine run -d --name "$1" "${run_opts[@]}" --network host --read-only -v "$volume:/data" \
    -e MARSPEC_ADDR="127.0.0.1:$port" "$image:$tag" >/dev/null 2>>"$work/engine.log"
}
# serves URL PATTERN: the body is read whole before it is searched. `curl | grep -q` fails under pipefail
# whenever grep matches and exits before curl has written its last piece (curl then dies of SIGPIPE, exit
# 23): a CI run once lost the gallery check after a restart that way, with the page served.
serves() { local body; body=$(curl -sf "$1") && grep -qi -- "$2" <<<"$body"; }

healthy() { # NAME: the image's HEALTHCHECK says healthy within a minute
  local i status
  for i in $(seq 1 60); do
    if [ $engine = podman ]; then
      $engine healthcheck run "$1" >/dev/null 2>&1 && return 0 # podman runs it on demand (no systemd timers here)
    else
      status=$($engine inspect --format '{{.State.Health.Status}}' "$1")
      [ "$status" = healthy ] && return 0
    fi
    sleep 1
  done
  $engine logs "$1" 2>&1 | tail -n 20 >&2
  return 1
}

serve marspec-check-1
healthy marspec-check-1 || fail "the server did not report healthy within 60 s (its log is above)"
say "ok: HEALTHCHECK healthy"

job=$(curl -sf -X POST "$url/v1/generations?wait=60s" -H 'Content-Type: application/json' -d '{"class":1,"n":1,"seed":7}') ||
  fail "POST /v1/generations failed"
id=$(echo "$job" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["status"]=="succeeded", j; print(j["id"])') ||
  fail "the job did not succeed: $job"
curl -sf -o "$work/image.png" "$url/v1/images/$id-0.png" || fail "GET of the image failed"
head -c 8 "$work/image.png" | od -An -c | grep -q 'P   N   G' || fail "the image is not a PNG"
say "ok: POST made job $id and a PNG of $(stat -c %s "$work/image.png") bytes"

uid=$($engine exec marspec-check-1 id -u)
[ "$uid" != 0 ] || fail "the server runs as root"
$engine exec marspec-check-1 sh -c 'touch /usr/local/bin/x' 2>/dev/null && fail "the root file system is writable"
$engine exec marspec-check-1 sh -c 'touch /data/.write-check && rm /data/.write-check' || fail "/data is not writable"
say "ok: runs as uid $uid; / is read-only, /data writable (the engine's /tmp is a tmpfs)"

$engine stop -t 10 marspec-check-1 >/dev/null 2>>"$work/engine.log"
$engine start marspec-check-1 >/dev/null 2>>"$work/engine.log"
healthy marspec-check-1 || fail "the server did not come back after a restart"
serves "$url/v1/generations/$id" '"succeeded"' || fail "job $id is gone after a restart on the same volume"
curl -sf -o /dev/null "$url/v1/images/$id-0.png" || fail "the image of job $id is gone after a restart"
serves "$url/" '<html' || fail "the gallery page is not served after a restart"
say "ok: stopped and started on the same volume: job, image and gallery intact"
$engine rm -f marspec-check-1 >/dev/null 2>>"$work/engine.log"

cli() { $engine run --rm "${run_opts[@]}" --read-only -v "$volume:/data" "$image:$tag" "$@" 2>>"$work/engine.log"; }
for seed in 3 4; do
  cli generate --class all --n 2 --seed $seed --out /data/cli-$seed --grid none --quiet >/dev/null ||
    fail "marspec generate from the image failed"
done
cli fid --quiet /data/cli-3 /data/cli-4 >"$work/fid.txt" || { tail -n 20 "$work/engine.log" >&2; fail "marspec fid from the image failed"; }
say "ok: generate (2 x 20 images) and fid from the image: $(tr '\n' ' ' <"$work/fid.txt" | head -c 160)"

# ---- a replica pair on PostgreSQL and S3 ----
pg=${MARSPEC_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
db=marspec_image_$$
psql "$pg" -qc "CREATE DATABASE $db" || fail "cannot create a database on $pg"
store=$(echo "$pg" | sed "s#/[A-Za-z0-9_]*\([?]\|\$\)#/$db\1#")
gw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
[ -x "$gw" ] || fail "versitygw is missing (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)"
mkdir -p "$work/s3"
gw_port=$((port + 10))
"$gw" --access marspec --secret marspecsecret --port "127.0.0.1:$gw_port" posix "$work/s3" >"$work/gw.log" 2>&1 &
gw_pid=$!
for i in $(seq 1 30); do (exec 3<>"/dev/tcp/127.0.0.1/$gw_port") 2>/dev/null && break; sleep 0.5; done
blobs="s3://marspec:marspecsecret@gallery?endpoint=http://127.0.0.1:$gw_port&region=us-east-1"
for r in 1 2; do
  containers+=("marspec-replica-$r")
  $engine volume create "$volume-$r" >/dev/null
  $engine run -d --name "marspec-replica-$r" "${run_opts[@]}" --network host --read-only -v "$volume-$r:/data" \
    -e MARSPEC_ADDR="127.0.0.1:$((port + r))" -e MARSPEC_STORE="$store" -e MARSPEC_BLOBS="$blobs" "$image:$tag" >/dev/null 2>>"$work/engine.log"
done
{ healthy marspec-replica-1 && healthy marspec-replica-2; } || fail "a replica did not report healthy"
ids=()
for i in 1 2 3 4 5 6; do
  ids+=("$(curl -sf -X POST "http://127.0.0.1:$((port + 1))/v1/generations" -H 'Content-Type: application/json' \
    -d "{\"class\":$((i % 10)),\"n\":2,\"seed\":$i}" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')") ||
    fail "POST to replica 1 failed"
done
# replica 1 stops at once: whatever it had not finished, replica 2 must
$engine stop -t 30 marspec-replica-1 >/dev/null 2>>"$work/engine.log"
for id in "${ids[@]}"; do
  for i in $(seq 1 120); do
    serves "http://127.0.0.1:$((port + 2))/v1/generations/$id" '"status":"succeeded"' && break
    [ "$i" = 120 ] && fail "job $id (posted to replica 1, which then stopped) did not succeed within 120 s on replica 2"
    sleep 1
  done
  curl -sf -o /dev/null "http://127.0.0.1:$((port + 2))/v1/images/$id-1.png" || fail "replica 2 cannot serve an image of job $id"
done
say "ok: 6 jobs posted to replica 1, which then stopped, all succeeded and serve their images from replica 2"
psql "$pg" -qc "DROP DATABASE $db WITH (FORCE)" >/dev/null 2>&1 || true
say "all checks passed: $image:$tag, $((size / 1000000)) MB, built in ${build_seconds} s"
