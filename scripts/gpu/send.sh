#!/usr/bin/env bash
# Sending the GPU run (gpu_bench.sh) to a lent machine that reaches nothing and takes at most 64 MiB a
# call (docs/gpu.md, "Sending it"): what to make here first, and what call 1 starts there.
#
#   bash scripts/gpu/send.sh prepare [--official-git DIR] [--arch 90]
#        here, before asking for the machine: the GPU runtime in 8 MiB parts for one
#        architecture (sm_90: H100, H200), bin/marspec.xz (the machine has no Go), the official
#        MAR code's models/ and diffusion/ in out/official-mar (from DIR, a git directory of
#        github.com/LTH14/mar: default the mirror `fetch github:LTH14/mar` leaves); then prints
#        what each call carries and runs
#   bash scripts/gpu/send.sh start
#        there, in call 1: unpacks bin/marspec and starts making the random MAR-B pack in the
#        background (out/packs/mar-base.making until it ends; mar-base.done when it succeeded),
#        which gpu_mar.py's pack stage waits for
set -euo pipefail
cd "$(dirname "$0")/../.."

parts=third_party/onnxruntime-gpu-parts

prepare() {
  local official_git=/work/.mirror/LTH14+mar/repo arch=90
  while [ $# -gt 0 ]; do
    case "$1" in
    --official-git) official_git=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    *) echo "send.sh prepare: unknown option $1 (allowed: --official-git DIR, --arch N)" >&2; exit 2 ;;
    esac
  done
  if [ ! -f "$parts/SHA256SUMS" ]; then
    bash scripts/ops/setup_ort.sh --gpu-parts --arch "$arch" --part-mib 8
  fi
  go build -ldflags="-s -w" -o bin/marspec ./cmd/marspec
  xz -9 -k -f bin/marspec
  if [ -d "$official_git" ]; then
    rm -rf out/official-mar && mkdir -p out/official-mar
    # a mirror may lack blobs outside these folders; git names them on stderr and exits 0
    git --git-dir="$official_git" archive HEAD models diffusion 2>/dev/null | tar -x -C out/official-mar
    [ -f out/official-mar/models/mar.py ] || { echo "send.sh prepare: no models/mar.py in $official_git" >&2; exit 1; }
  elif [ ! -d out/official-mar/models ]; then
    echo "send.sh prepare: no official MAR code: fetch github:LTH14/mar and pass --official-git DIR (the official rows will say it is missing)" >&2
  fi
  plan
}

# plan prints the calls: each carries what fits beside the working tree (which every call
# carries too) under the 64 MiB a call takes, with 2 MiB to spare; the last one runs the script
plan() {
  local tree untracked room size call=1 carry=() left
  tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  untracked=$(git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
  tree=$((tree + ${untracked:-0}))
  room=$((62 * 1024 * 1024 - tree))
  left=$room
  echo "send.sh: the working tree is $((tree / 1000000)) MB; each call carries at most $((room / 1000000)) MB more. Each call within 30 s of the last:"
  flush() {
    echo "  call $call carry: ${carry[*]}"
    echo "         run:   $1"
    call=$((call + 1)) carry=() left=$room
  }
  for item in bin/marspec.xz out/official-mar "$parts"/part-*; do
    size=$(du -cb "$item" | tail -1 | cut -f1)
    if [ "$size" -gt "$left" ] && [ ${#carry[@]} -gt 0 ]; then
      flush "$([ "$call" = 1 ] && echo 'bash scripts/gpu/send.sh start' || echo true)"
    fi
    carry+=("$item") left=$((left - size))
  done
  carry+=("$parts/SHA256SUMS" "$parts/FORMAT")
  flush "bash scripts/gpu/gpu_bench.sh --official out/official-mar; cp -r out/gpu-bench/. \$OUT/   (timeout_s 560)"
  echo "  call $call carry: nothing"
  echo "         run:   MARSPEC_GPU_MINUTES=5 bash scripts/gpu/gpu_bench.sh --official out/official-mar; cp -r out/gpu-bench/. \$OUT/"
}

start() {
  if [ -f bin/marspec.xz ]; then
    xz -d -k -f bin/marspec.xz
    chmod +x bin/marspec
  fi
  . scripts/gpu/python.sh
  torch_python send.sh
  mkdir -p out/packs
  rm -f out/packs/mar-base.done
  touch out/packs/mar-base.making
  # its own session, so that the call's end does not stop it; the marker goes either way
  setsid bash -c "
    if PYTHONWARNINGS=ignore '$python' scripts/packs/make_random_packs.py --models mar_base --vae kl16 --checkpoint --out out/packs > out/packs/mar-base.log 2>&1; then
      touch out/packs/mar-base.done
    fi
    rm -f out/packs/mar-base.making" < /dev/null > /dev/null 2>&1 &
  echo "send.sh: bin/marspec $( [ -x bin/marspec ] && echo ready || echo missing ); making out/packs/mar-base in the background (log: out/packs/mar-base.log)"
}

case "${1:-}" in
prepare) shift; prepare "$@" ;;
start) start ;;
*) echo "usage: bash scripts/gpu/send.sh prepare [--official-git DIR] [--arch N] | start" >&2; exit 2 ;;
esac
