#!/usr/bin/env bash
# Runs the commands of docs/real-checkpoint.md in order, as a MAR user would, at reduced size on
# random weights, so a command of the guide that stops working fails CI (.ci/run), as
# readme_check.sh does for the README. The guide's inputs are made here: a random checkpoint of
# MAR-B's token layout in the official layout (ci_target, a few MB, with its KL-16-shaped VAE)
# where the guide has pretrained/, a randomly initialised Inception network where it has
# pytorch-fid's weights (eval and frontier then score with a tiny evaluator: below). Each command
# runs with the guide's own flags, a few of them cut to size (N of 10, a 10-update head
# distillation on the CPU); `serve` runs in the background until the next one, the guide's curl
# calls against it; --device cuda is dropped (CI has no GPU). The time of each is printed.
#
# usage: bash scripts/ops/guide_check.sh   (after make build; needs /usr/bin/python3 with torch and onnx)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
guide="$repo/docs/real-checkpoint.md"
python=/usr/bin/python3
port=18091
export MARSPEC_ORT_LIB="${MARSPEC_ORT_LIB:-$repo/third_party/onnxruntime/libonnxruntime.so}"

work="$(mktemp -d)"
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
cleanup() { stop_server; rm -rf "$work"; }
trap cleanup EXIT

step() { # step NAME COMMAND...: run, time, and stop with the command on failure
  local name="$1"; shift
  local start=$SECONDS
  if ! "$@" > "$work/log.txt" 2>&1; then
    echo "guide_check: FAILED: $name" >&2
    tail -20 "$work/log.txt" >&2
    exit 1
  fi
  printf 'guide_check: ok %4ds  %s\n' $((SECONDS - start)) "$name"
}

# a fresh folder with the binary and the scripts, as a checkout's root
mkdir -p "$work/run/bin"
ln -s "$repo/bin/marspec" "$work/run/bin/marspec"
ln -s "$repo/scripts" "$work/run/scripts"
cd "$work/run"

# the guide's inputs at reduced size
step "random checkpoint (ci_target, official layout)" \
  "$python" scripts/packs/make_random_packs.py --models ci_target --vae ci_kl16 --checkpoint --out "$work/random"
mkdir -p pretrained/mar_base pretrained/vae
cp "$work/random/ci-target/checkpoint-last.pth" pretrained/mar_base/checkpoint-last.pth
cp "$work/random/ci-target/vae.ckpt" pretrained/vae/kl16.ckpt
# FID against the 2048-d Inception features costs minutes per score on a CPU (a 2048x2048 matrix
# square root), and frontier scores every configuration twice: eval and frontier score with a
# tiny evaluator instead (32x32 input, 8 random features, its reference.npz beside it), after
# the guide's export_inception.py has run as written (with --random for the weights)
mkdir -p "$work/tiny"
"$python" "$repo/scripts/tests/tiny_evaluator.py" "$work/tiny" tiny-guide-check

# the lines of the guide's sh blocks, continuation lines joined, comments cut
mapfile -t commands < <(awk '/^```sh/ { f = 1; next } /^```/ { f = 0; next } f' "$guide" |
  sed -e 's/[[:space:]]\{2,\}#.*$//' -e 's/[[:space:]]*$//' |
  awk '{ if (sub(/\\$/, "")) { buf = buf $0; next } print buf $0; buf = "" }' | grep -v '^$')
[ ${#commands[@]} -ge 15 ] || { echo "guide_check: found only ${#commands[@]} commands in $guide" >&2; exit 1; }

# the guide's command at reduced size: the same command and flags, smaller where it is long
reduce() {
  local c="$1"
  case "$c" in
    *export_mar.py*) c="${c/--model mar_base/--model ci_target --vae-config ci_kl16 --settings-of mar_base}" ;;
    *export_inception.py*) c="${c/--weights pt_inception-2015-12-05-6726825d.pth/--random}" ;;
    *"eval --protocol mar"*)
      if [[ "$c" == *"--n 2000"* ]]; then c="${c/--n 2000/--n 10}"; else c="$c --n 10"; fi
      c="$c --chunk 10 --batch 10 --threads 1 --quiet" ;;
    *"frontier --target"*) c="${c/--n 2000/--n 10} --chunk 10 --threads 1 --quiet" ;;
    *distill_head.py*)
      c="${c/--device cuda --tf32 --minutes 60 --batch 512 --reuse 8 --images 64 --per-image 16/--max-steps 10 --minutes 2 --width 32 --depth 1 --pool 8 --gen-iter 4 --gen-fresh 2 --gen-batch 2 --images 4 --per-image 16 --batch 32 --heldout 64}" ;;
  esac
  c="${c//--evaluator evaluators\/inception --reference VIRTUAL_imagenet256_labeled.npz/--evaluator $work/tiny --reference $work/tiny/reference.npz}"
  c="${c// --device cuda/}"
  c="${c//127.0.0.1:8080/127.0.0.1:$port}"
  echo "$c"
}

n=0
for c in "${commands[@]}"; do
  r="$(reduce "$c")"
  case "$r" in
    "./bin/marspec serve "*)
      stop_server
      n=$((n + 1))
      start=$SECONDS
      bash -c "exec $r --data-dir '$work/data-$n'" > "$work/serve-$n.log" 2>&1 &
      server_pid=$!
      for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$port/healthz" > /dev/null 2>&1 && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.2
      done
      curl -sf "http://127.0.0.1:$port/healthz" > /dev/null ||
        { echo "guide_check: FAILED: $r did not come up" >&2; tail -20 "$work/serve-$n.log" >&2; exit 1; }
      printf 'guide_check: ok %4ds  %s\n' $((SECONDS - start)) "$r"
      ;;
    curl*)
      start=$SECONDS
      answer="$(bash -c "$r")"
      grep -q '"status":"succeeded"' <<< "$answer" ||
        { echo "guide_check: FAILED: $r: $answer" >&2; tail -20 "$work/serve-$n.log" >&2; exit 1; }
      printf 'guide_check: ok %4ds  %s\n' $((SECONDS - start)) "$r"
      ;;
    *) step "$r" bash -c "$r" ;;
  esac
done
stop_server
echo "guide_check: every command of docs/real-checkpoint.md ran"
