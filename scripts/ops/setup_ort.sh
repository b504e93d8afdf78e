#!/usr/bin/env bash
# Fetch ONNX Runtime's shared library into third_party/ (git-ignored).
#
#   bash scripts/ops/setup_ort.sh                 CPU build (what `make setup` runs)
#   bash scripts/ops/setup_ort.sh --gpu           GPU build: ORT core + CUDA provider (docs/gpu.md)
#   bash scripts/ops/setup_ort.sh --gpu-parts     the GPU build as parts of at most 40 MiB, for a
#                                                 machine that cannot reach npm (docs/gpu.md)
#   bash scripts/ops/setup_ort.sh --gpu-parts --arch 90 [--part-mib N]
#                                                 the same for one GPU architecture only (sm_90: H100,
#                                                 H200): the other architectures' code zeroed
#                                                 (scripts/gpu/prune_fatbin.py) and xz: 46 MB in all
#   bash scripts/ops/setup_ort.sh --gpu-from-parts   rebuild the GPU build from those parts
#
# CPU: the npm registry's onnxruntime-node package (ORT $VERSION, what onnxruntime_go v1.27.0
# is built against). GPU: the core from onnxruntime-node@$GPU_CORE_VERSION (ORT 1.29, built with
# the CUDA provider interface) and the CUDA provider from com.github.asus4.onnxruntime.linux-x64-gpu
# (the same ORT commit, built against CUDA 13 and cuDNN 9). Core and provider must come from the
# same release AND the core must be built with CUDA: the provider calls the core through a table
# of virtual functions (ProviderHost) that has 16 more entries in a CUDA build, so a CPU-only core
# (com.github.asus4.onnxruntime's, used here until the first GPU run) loads the provider and then
# crashes at the first session, every call landing one slot off (seen on an H200, 2026-11-26).
set -euo pipefail
VERSION=1.24.1
GPU_VERSION=0.4.9
GPU_CORE_VERSION=1.29.0
cd "$(dirname "$0")/../.."
mode=${1:-cpu}
arch=""
part_mib=40
shift || true
while [ $# -gt 0 ]; do
  case "$1" in
  --arch) arch=$2; shift 2 ;;
  --part-mib) part_mib=$2; shift 2 ;;
  *) echo "setup_ort: unknown option $1 (allowed after --gpu-parts: --arch N, --part-mib N)" >&2; exit 2 ;;
  esac
done
gpu_dir=third_party/onnxruntime-gpu
parts_dir=third_party/onnxruntime-gpu-parts
# one part per call to the GPU machine: its transfers stop at 64 MiB, working tree included

need_linux_x64() {
  if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
    echo "setup_ort: only Linux x86_64 is handled (this is $(uname -s) $(uname -m)); install ONNX Runtime yourself and set MARSPEC_ORT_LIB" >&2
    exit 1
  fi
}

need_npm() {
  command -v npm >/dev/null || { echo "setup_ort: npm is needed to fetch ONNX Runtime (apt-get install npm)" >&2; exit 1; }
}

# npm_file PACKAGE@VERSION PATH_IN_PACKAGE DEST: one file out of an npm package
npm_file() {
  local pkg=$1 inner=$2 dest=$3 tmp
  tmp=$(mktemp -d)
  echo "setup_ort: fetching $pkg from the npm registry"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || { rm -rf "$tmp"; echo "setup_ort: npm pack $pkg failed (is the npm registry reachable? npm's own message is above)" >&2; exit 1; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" "package/$inner" || { rm -rf "$tmp"; echo "setup_ort: $pkg has no $inner" >&2; exit 1; }
  mkdir -p "$(dirname "$dest")"
  cp "$tmp/package/$inner" "$dest.part"
  mv "$dest.part" "$dest"
  rm -rf "$tmp"
}

# npm_files PACKAGE@VERSION DIR_IN_PACKAGE DEST_DIR FILE...: several files of one package
npm_files() {
  local pkg=$1 inner=$2 dest=$3 tmp f
  shift 3
  tmp=$(mktemp -d)
  echo "setup_ort: fetching $pkg from the npm registry"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || { rm -rf "$tmp"; echo "setup_ort: npm pack $pkg failed (is the npm registry reachable? npm's own message is above)" >&2; exit 1; }
  for f in "$@"; do
    tar -xzf "$tmp"/*.tgz -C "$tmp" "package/$inner/$f" || { rm -rf "$tmp"; echo "setup_ort: $pkg has no $inner/$f" >&2; exit 1; }
    cp "$tmp/package/$inner/$f" "$dest/$f.part"
    mv "$dest/$f.part" "$dest/$f"
  done
  rm -rf "$tmp"
}

gpu_complete() {
  [ -s "$gpu_dir/libonnxruntime.so" ] && [ -s "$gpu_dir/libonnxruntime_providers_shared.so" ] && [ -s "$gpu_dir/libonnxruntime_providers_cuda.so" ]
}

case "$mode" in
cpu)
  dest=third_party/onnxruntime/libonnxruntime.so
  [ -s "$dest" ] && exit 0
  need_linux_x64
  need_npm
  npm_file "onnxruntime-node@$VERSION" bin/napi-v6/linux/x64/libonnxruntime.so.1 "$dest"
  echo "setup_ort: installed $dest"
  ;;
--gpu)
  gpu_complete && { echo "setup_ort: $gpu_dir is complete"; exit 0; }
  need_linux_x64
  need_npm
  mkdir -p "$gpu_dir"
  npm_file "onnxruntime-node@$GPU_CORE_VERSION" bin/napi-v6/linux/x64/libonnxruntime.so.1 "$gpu_dir/libonnxruntime.so"
  # the provider is 230 MB unpacked (the package 180 MB): one download
  npm_files "com.github.asus4.onnxruntime.linux-x64-gpu@$GPU_VERSION" Plugins/Linux/x64 "$gpu_dir" \
    libonnxruntime_providers_shared.so libonnxruntime_providers_cuda.so
  echo "setup_ort: installed ONNX Runtime 1.29 with the CUDA provider in $gpu_dir (it needs CUDA 13 and cuDNN 9 at run time: docs/gpu.md)"
  ;;
--gpu-parts)
  gpu_complete || bash "$0" --gpu
  rm -rf "$parts_dir"
  mkdir -p "$parts_dir"
  if [ -n "$arch" ]; then
    python=/usr/bin/python3
    [ -x "$python" ] || python=python3
    stage=$(mktemp -d)
    mkdir "$stage/onnxruntime-gpu"
    cp "$gpu_dir/libonnxruntime.so" "$gpu_dir/libonnxruntime_providers_shared.so" "$stage/onnxruntime-gpu/"
    "$python" scripts/gpu/prune_fatbin.py "$gpu_dir/libonnxruntime_providers_cuda.so" "$stage/onnxruntime-gpu/libonnxruntime_providers_cuda.so" --keep-arch "$arch"
    chmod +x "$stage/onnxruntime-gpu/"*.so
    tar -C "$stage" -cf - onnxruntime-gpu | xz -9 -T0 | split -b "${part_mib}m" -d -a 2 - "$parts_dir/part-"
    rm -rf "$stage"
    echo "xz sm_$arch" > "$parts_dir/FORMAT"
  else
    tar -C third_party -cf - onnxruntime-gpu | gzip -6 | split -b "${part_mib}m" -d -a 2 - "$parts_dir/part-"
    echo "gzip" > "$parts_dir/FORMAT"
  fi
  (cd "$parts_dir" && sha256sum part-* FORMAT > SHA256SUMS)
  echo "setup_ort: $(ls "$parts_dir"/part-* | wc -l) parts in $parts_dir (send one per call; then run setup_ort.sh --gpu-from-parts there)"
  ls -l "$parts_dir"
  ;;
--gpu-from-parts)
  gpu_complete && { echo "setup_ort: $gpu_dir is complete"; exit 0; }
  [ -f "$parts_dir/SHA256SUMS" ] || { echo "setup_ort: $parts_dir/SHA256SUMS is missing: make the parts with --gpu-parts and send them all (docs/gpu.md)" >&2; exit 1; }
  (cd "$parts_dir" && sha256sum --quiet -c SHA256SUMS) || { echo "setup_ort: a part in $parts_dir is missing or damaged (listed above): send it again" >&2; exit 1; }
  case "$(cat "$parts_dir/FORMAT" 2>/dev/null || echo gzip)" in
  xz*) cat "$parts_dir"/part-* | xz -dc | tar -C third_party -xf - ;;
  *) cat "$parts_dir"/part-* | gzip -dc | tar -C third_party -xf - ;;
  esac
  gpu_complete || { echo "setup_ort: the parts did not hold a complete $gpu_dir" >&2; exit 1; }
  echo "setup_ort: rebuilt $gpu_dir from $parts_dir"
  ;;
*)
  echo "setup_ort: unknown argument $mode (allowed: none, --gpu, --gpu-parts, --gpu-from-parts)" >&2
  exit 2
  ;;
esac
