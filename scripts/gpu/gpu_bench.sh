#!/usr/bin/env bash
# The GPU numbers in one command (docs/gpu.md says how to run it on a lent GPU).
#
#   bash scripts/gpu/gpu_bench.sh [--device cuda:N] [--official DIR] [gpu_mar.py options]
#                              the MAR-B run, at most MARSPEC_GPU_MINUTES (8) minutes from the
#                              start of this script: random MAR-B at num_iter 64, 100 steps, cfg
#                              2.9, batch 1, 8, 64; the official code in fp32 and under bf16
#                              autocast; marspec fp32 and fp16 with the per-step head, the fused
#                              head and the cache; the head's share; fp16 parity; then the energy
#                              head with what is left (scripts/gpu/gpu_mar.py has the stages and
#                              their budgets). Results: out/gpu-bench/results.jsonl (resumable)
#                              and out/gpu-bench/gpu-mar.md, the section for docs/.
#   bash scripts/gpu/gpu_bench.sh --tiny          the same on the CPU at tiny sizes (make test runs it)
#   bash scripts/gpu/gpu_bench.sh stages [--tiny] [gpu_stages.py options]
#                                                 the staged run of 2026-11-26: CUDA against the
#                                                 CPU, the embedded pair, MAR-B's passes
#   bash scripts/gpu/gpu_bench.sh pairs [--tiny] [gpu_bench.py options]
#                                                 the pairs' throughput and speculative decoding
#
# Sets up the runtime (for cuda: ONNX Runtime's GPU build in third_party/onnxruntime-gpu, from npm
# or from parts sent beforehand, and CUDA's libraries from the Python packages beside PyTorch),
# builds bin/marspec when Go is there (else uses the one carried over), then runs the driver.
set -euo pipefail
started=$(date +%s) # the 8 minutes count from here: the runtime's setup is part of them
cd "$(dirname "$0")/../.."
. scripts/gpu/python.sh

driver=gpu_mar.py
case "${1:-}" in
stages) driver=gpu_stages.py; shift ;;
pairs) driver=gpu_bench.py; shift ;;
esac

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

if [ "$driver" = gpu_mar.py ]; then
  args=(--deadline $((started + ${MARSPEC_GPU_MINUTES:-8} * 60)) "${args[@]}") # a --deadline given wins
fi
exec "$python" "scripts/gpu/$driver" --python "$python" "${args[@]}"
