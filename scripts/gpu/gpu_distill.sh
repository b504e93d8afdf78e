#!/usr/bin/env bash
# distill_head.py at full size on a lent GPU: a random-weight pack of the
# official layout, a timed self-context distillation into it, then distill_head_bench.py in
# fp32 and with TF32 allowed, side by side. Random weights make the student's quality
# meaningless (the unclipped teacher's endpoints are ~1e4 in RMS); the run proves the path at
# full size and measures what a real run costs per chunk.
#
#   bash scripts/gpu/gpu_distill.sh OUT [MODEL] [DEVICE] [MINUTES]    # defaults: mar_base cuda 5
#   bash scripts/gpu/gpu_distill.sh /tmp/d test_small cpu 0.2         # the same steps, small, here
set -u
out=${1:?usage: gpu_distill.sh OUT [MODEL] [DEVICE] [MINUTES]}
model=${2:-mar_base}
device=${3:-cuda}
minutes=${4:-5}
vae=kl16
[ "$model" = test_small ] && vae=test_tiny
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
. gpu/python.sh

torch_python gpu_distill

{
  date -u +%FT%TZ
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
  nproc
} >"$out/machine.txt" 2>&1

packs=$(mktemp -d)
pack_name=$(echo "$model" | tr _ -)
start=$(date +%s)
"$python" packs/make_random_packs.py --models "$model" --vae "$vae" --out "$packs" >"$out/make_pack.log" 2>&1 ||
  { echo "gpu_distill: make_random_packs.py failed"; tail -20 "$out/make_pack.log"; exit 1; }
echo "pack made in $(( $(date +%s) - start )) s"

start=$(date +%s)
"$python" train/distill_head.py --pack "$packs/$pack_name" --contexts self --out "$out/run" --device "$device" \
  --minutes "$minutes" --batch 512 --reuse 8 --images 64 --per-image 16 --threads 2 >"$out/distill.log" 2>&1
echo "distill_head.py: rc $? in $(( $(date +%s) - start )) s"
tail -3 "$out/distill.log"
cp "$packs/$pack_name/manifest.json" "$out/manifest.json" 2>/dev/null
ls -l "$packs/$pack_name" >"$out/pack-files.txt"

# TF32 through cuBLAS's override: the same code, matmuls on tensor cores.
for precision in fp32 tf32; do
  override=0; [ "$precision" = tf32 ] && override=1
  TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=$override timeout 90 "$python" bench/distill_head_bench.py --device "$device" \
    --models "$model" --updates 20 --threads 2 2>"$out/bench-$precision.err" |
    sed "s/^{/{\"precision\": \"$precision\", /" | tee -a "$out/bench.jsonl"
done
rm -rf "$packs"
