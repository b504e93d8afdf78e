"""Golden fixtures for the Go parity tests, computed in PyTorch from the checkpoint a pack was
exported from (so they check ONNX export + Go sampler against the training code).

  /usr/bin/python3 scripts/tests/make_fixtures.py --ckpt runs/target/checkpoint-last.pth \
      --steps 50 --out mar/testdata/parity_target.json
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from packs.export import load_model
from lib.mardiff import Diffusion
from train.sample import sample_tokens


def flat(t):
    return [float(v) for v in t.reshape(-1).tolist()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, _ = load_model(args.ckpt)
    g = torch.Generator().manual_seed(1234)
    b, L, D = 2, 49, 16
    tokens = torch.rand(b, L, D, generator=g) * 2 - 1
    mask = torch.ones(b, L)
    mask[0, torch.randperm(L, generator=g)[:10]] = 0
    mask[1, torch.randperm(L, generator=g)[:30]] = 0
    ids = torch.tensor([7, 3], dtype=torch.int64)
    drop = torch.tensor([0.0, 1.0])
    with torch.no_grad():
        z = model.forward_keep(tokens, mask, ids, drop)
        zu = model.forward_keep(tokens, mask, ids, torch.ones(b))
        hx = torch.randn(4, D, generator=g)
        ht = torch.tensor([0.0, 10.0, 500.0, 999.0])
        hz = z[0, :4]
        hout = model.diffloss.net(hx, ht, hz)
    fx = dict(token_dim=D, seq_len=L, width=z.shape[-1], sampling_steps=args.steps,
              transformer=dict(batch=b, tokens=flat(tokens), mask=flat(mask), class_ids=ids.tolist(),
                               drop_class=flat(drop), z=flat(z)),
              head=dict(n=4, x_t=flat(hx), t=flat(ht), z=flat(hz), out=flat(hout)),
              trajectories=[])
    diff = Diffusion.respaced(1000, args.steps)
    pos = [5, 40]
    zc = torch.stack([z[0, pos[0]], z[0, pos[1]]])
    zuc = torch.stack([zu[0, pos[0]], zu[0, pos[1]]])
    for cfg, temp in [(1.0, 1.0), (3.0, 0.9)]:
        xT = torch.randn(2, D, generator=g)
        noises = torch.randn(args.steps, 2, D, generator=g).double()
        x0, trace = sample_tokens(model, diff, zc, xT, noises, cfg, temp, True,
                                  zuc if cfg != 1.0 else None)
        fx["trajectories"].append(dict(
            cfg=cfg, temperature=temp, clip_x0=True, z=flat(zc), z_uncond=flat(zuc), x_T=flat(xT),
            noise=flat(noises), x0=flat(x0),
            last_mean=flat(trace[-1][0]), last_logvar=flat(trace[-1][1]),
            first_mean=flat(trace[0][0]), first_logvar=flat(trace[0][1])))
    with open(args.out, "w") as f:
        json.dump(fx, f)


if __name__ == "__main__":
    main()
