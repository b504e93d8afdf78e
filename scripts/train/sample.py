"""Sample images from a checkpoint in PyTorch (the reference sampler; also a quick look at a
checkpoint before trusting its loss). One token per AR step, random order.

  /usr/bin/python3 scripts/train/sample.py --ckpt runs/target/checkpoint-last.pth --out /tmp/grid.png
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import fmnist
from lib.pngfile import write_png
from packs.export import load_model
from lib.mardiff import Diffusion


def sample_tokens(model, diff, z, xT, noises, cfg_scale, temperature, clip_x0, z_uncond=None):
    """Reverse diffusion for rows of z. noises: [steps, N, D] standard normal. Returns x0, trace."""
    x = xT.double()
    n = x.shape[0]
    trace = []
    for k in reversed(range(diff.T)):
        kk = torch.full((n,), k, dtype=torch.long)
        t = torch.full((n,), float(diff.timestep_map[k]))
        with torch.no_grad():
            out = model.diffloss.net(x.float(), t, z).double()
            if z_uncond is not None:
                out_u = model.diffloss.net(x.float(), t, z_uncond).double()
                d = x.shape[1]
                eps = out_u[:, :d] + cfg_scale * (out[:, :d] - out_u[:, :d])
                out = torch.cat([eps, out[:, d:]], dim=1)
        mean, logvar, _ = diff.p_mean_logvar(kk, x, out, clip_x0)
        logvar = logvar + 2 * np.log(temperature)
        x = mean + (torch.exp(0.5 * logvar) * noises[diff.T - 1 - k] if k > 0 else 0)
        trace.append((mean.clone(), logvar.clone()))
    return x, trace


def generate(model, classes, steps, cfg, temperature, seed):
    g = torch.Generator().manual_seed(seed)
    diff = Diffusion.respaced(1000, steps)
    b = len(classes)
    ids = torch.tensor(classes, dtype=torch.int64)
    tokens = torch.zeros(b, 49, 16)
    mask = torch.ones(b, 49)
    orders = torch.argsort(torch.rand(b, 49, generator=g), dim=1)
    for i in range(49):
        known = i + 1
        scale = 1 + (cfg - 1) * known / 49
        with torch.no_grad():
            z = model.forward_keep(tokens, mask, ids, torch.zeros(b))
            zu = model.forward_keep(tokens, mask, ids, torch.ones(b)) if cfg != 1.0 else None
        pos = orders[:, i]
        zr = z[torch.arange(b), pos]
        zur = zu[torch.arange(b), pos] if zu is not None else None
        xT = torch.randn(b, 16, generator=g)
        noises = torch.randn(steps, b, 16, generator=g).double()
        x0, _ = sample_tokens(model, diff, zr, xT, noises, scale, temperature, True, zur)
        tokens[torch.arange(b), pos] = x0.float()
        mask[torch.arange(b), pos] = 0
    return fmnist.untokenize(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--cfg", type=float, default=1.0)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--per-class", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, _ = load_model(args.ckpt)
    classes = [c for c in range(10) for _ in range(args.per_class)]
    imgs = generate(model, classes, args.steps, args.cfg, args.temperature, args.seed)
    rows = [np.concatenate(list(imgs[c * args.per_class:(c + 1) * args.per_class]), axis=1) for c in range(10)]
    grid = np.concatenate(rows, axis=0)
    grid = np.kron(grid, np.ones((3, 3), dtype=np.uint8))
    write_png(args.out, grid)


if __name__ == "__main__":
    main()
