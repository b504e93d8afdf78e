#!/usr/bin/env bash
# The embedded head's energy-score fine-tune (scripts/train/energy_head.py) on a lent GPU, with
# the settings of the pack's head (teacher and noise scale 0.9, 16 samples a side, the rate
# annealed to 0) and CONTEXTS contexts per update, 16x what one CPU core affords: on the CPU the
# recipe sits at its gradient noise (docs/models.md, "An annealed rate and a deeper student").
# Writes OUT/train.log, OUT/student-last.pth and OUT/machine.txt; the export, the paired held-out
# check and the FID first look run on the development machine afterwards (docs/models.md).
#   bash scripts/gpu/gpu_energy_head.sh OUT [MINUTES=6] [DEVICE=cuda]
#   CONTEXTS=16 IMAGES=8 HELDOUT=16 bash scripts/gpu/gpu_energy_head.sh /tmp/e 0.2 cpu   # the same steps, small, here
# Fashion-MNIST comes from MARSPEC_FMNIST (default Debian's folder); a lent machine has none, so
# copy /usr/share/datasets/fashion-mnist to out/fmnist here, carry out/fmnist and set
# MARSPEC_FMNIST=out/fmnist.
set -u
out=${1:?usage: gpu_energy_head.sh OUT [MINUTES] [DEVICE]}
minutes=${2:-6}
device=${3:-cuda}
groups=${CONTEXTS:-1024}
images=${IMAGES:-256}
heldout=${HELDOUT:-256}
lr=${LR:-1e-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "${MARSPEC_FMNIST:-}" ] && export MARSPEC_FMNIST=$(cd "$MARSPEC_FMNIST" && pwd)
cd "$(dirname "$0")/../.."
. scripts/gpu/python.sh

torch_python gpu_energy_head
{
  date -u +%FT%TZ
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name())"
  nproc
} >"$out/machine.txt" 2>&1

start=$(date +%s)
"$python" scripts/train/energy_head.py --pack models/target --out "$out" --device "$device" --minutes "$minutes" \
  --lr "$lr" --lr-end 0 --groups "$groups" --m 16 --images "$images" --per-image 8 --reuse 4 --log-every 100 \
  --box-weight 10 --teacher-temperature 0.9 --noise-scale 0.9 --heldout-contexts "$heldout" --threads 2 \
  >"$out/energy_head.log" 2>&1
rc=$?
echo "energy_head.py: rc $rc in $(( $(date +%s) - start )) s"
tail -n 3 "$out/energy_head.log"
tail -n 1 "$out/train.log" | cut -c1-400
exit $rc
