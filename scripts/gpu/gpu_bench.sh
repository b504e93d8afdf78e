#!/usr/bin/env bash
# The GPU numbers (docs/BENCHMARKS.md, "How fast on a GPU?") in one command (docs/gpu.md says how to run it on a lent GPU).
#
#   bash scripts/gpu/gpu_bench.sh [--device cuda:N] [--official DIR] [gpu_bench.py options]
#   bash scripts/gpu/gpu_bench.sh --tiny          the same on the CPU at tiny sizes (a check that runs)
#   bash scripts/gpu/gpu_bench.sh stages [--tiny] [gpu_stages.py options]
#                                                 the staged run in priority order instead: CUDA
#                                                 against the CPU, the embedded pair, MAR-B's passes
#
# Sets up the runtime (for cuda: ONNX Runtime's GPU build in third_party/onnxruntime-gpu, from npm
# or from parts sent beforehand, and CUDA's libraries from the Python packages beside PyTorch),
# builds bin/marspec when Go is there (else uses the one carried over), makes the random-weight
# packs, then runs scripts/gpu/gpu_bench.py. Results: out/gpu-bench/results.jsonl (resumable) and
# out/gpu-bench/gpu-bench.md, the section for docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/python.sh

driver=gpu_bench.py
if [ "${1:-}" = stages ]; then
  driver=gpu_stages.py
  shift
fi

device=cuda
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
  --tiny) device=cpu ;;
  --device) j=$((i + 1)); device=${!j} ;;
  esac
done
# --tiny means the CPU unless a device is named after it
args=("$@")
if [[ " ${args[*]} " == *" --tiny "* && " ${args[*]} " != *" --device "* ]]; then
  args+=(--device cpu)
fi

torch_python gpu_bench

if [[ $device == cuda* ]]; then
  if [ -f third_party/onnxruntime-gpu-parts/SHA256SUMS ]; then
    bash scripts/ops/setup_ort.sh --gpu-from-parts
  else
    bash scripts/ops/setup_ort.sh --gpu
  fi
  export MARSPEC_ORT_LIB=$PWD/third_party/onnxruntime-gpu/libonnxruntime.so
  # CUDA 13, cuBLAS, cuRAND and cuDNN 9 as PyTorch's pip wheels ship them (nvidia/*/lib)
  cuda_libs=$("$python" - <<'EOF' 2>/dev/null || true
import os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = []
for root in nvidia.__path__:
    for name in sorted(os.listdir(root)):
        lib = os.path.join(root, name, "lib")
        if os.path.isdir(lib):
            dirs.append(lib)
print(":".join(dirs))
EOF
)
  if [ -n "$cuda_libs" ]; then
    export LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  make -s setup
fi

# build here when Go can (it needs the module cache or the module proxy); else use the binary
# brought along (docs/gpu.md)
if ! { command -v go >/dev/null && go build -o bin/marspec.new ./cmd/marspec 2>/dev/null && mv bin/marspec.new bin/marspec; }; then
  rm -f bin/marspec.new
  [ -x bin/marspec ] || { echo "gpu_bench: cannot build bin/marspec here and none was brought: build it elsewhere (go build -ldflags=\"-s -w\" -o bin/marspec ./cmd/marspec) and bring it (docs/gpu.md)" >&2; exit 1; }
  echo "gpu_bench: using the bin/marspec brought along ($(date -r bin/marspec))" >&2
fi

exec "$python" "scripts/gpu/$driver" --python "$python" "${args[@]}"
