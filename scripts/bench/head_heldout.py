"""The few-step head's held-out energy distance to ddim eta 1 in 25 steps (lib.headchain.HeldOut)
for chain-time sets other than the trained K = 1, 2, 4 chains, at a temperature, beside ddim eta 1
at other step counts: how far each sampler is from the `quality` preset's head sampler per token,
to set against the paired FIDs in docs/FRONTIER.md (a calibration, no training).

  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/bench/head_heldout.py \
      --pack models/target --temperature 0.9 --times 999 999,500 999,749 999,250 999,749,250

The temperature applies to both sides as the Go samplers apply it: the head's input noise and
re-noising are scaled (mar/denoise_distilled.go), ddim's injected noise is (diffusion.SampleStep).
Prints one JSON object: the check's own baselines, then each ddim step count and each time set.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import headchain as hc
from train import distill_head as dh


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pack", default="models/target")
    ap.add_argument("--head", help="distilled_head.onnx to read (default: the pack's)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--times", nargs="+", default=["999", "999,500", "999,749,500,250"],
                    help="chain-time sets, each comma-separated and decreasing")
    ap.add_argument("--ddim-steps", default="10,25,50", help="ddim eta 1 step counts to place beside them")
    ap.add_argument("--contexts", type=int, default=256)
    ap.add_argument("--samples", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    mar, clip = dh.frozen_target(argparse.Namespace(pack=args.pack, target_ckpt=None))
    held = hc.HeldOut(mar, mar.diffloss.net, clip, args.contexts, args.samples, temperature=args.temperature)
    student = hc.load_onnx_student(args.head or os.path.join(args.pack, "distilled_head.onnx")).eval()
    out = {"temperature": args.temperature, "baselines": held.baselines, "ddim_eta1": {}, "head": {}}
    for steps in [int(s) for s in args.ddim_steps.split(",")]:
        x = held.teacher(1.0, steps, 4321 + steps)
        out["ddim_eta1"][str(steps)] = {"distance": held.distance(x), "at_bounds": hc.at_bounds(x)}
    for spec in args.times:
        times = [int(t) for t in spec.split(",")]
        if any(b >= a for a, b in zip(times, times[1:])) or not all(0 <= t < dh.TRAIN_STEPS for t in times):
            ap.error(f"--times {spec}: want decreasing training timesteps in 0..{dh.TRAIN_STEPS - 1}")
        x = held.chain(student, times, args.temperature, dh.generator(99))
        out["head"][spec] = {"distance": held.distance(x), "unguided": held.distance(x, unguided=True),
                             "at_bounds": hc.at_bounds(x)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
