"""Train one MAR-style model on Fashion-MNIST within a wall-clock budget.

  /usr/bin/python3 scripts/train/train.py --preset target --minutes 40 --out runs/target
Writes runs/<name>/checkpoint-last.pth (MAR layout: `model` and `model_ema` state dicts, plus
`args`) every few minutes and at the end, and a log of losses.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import fmnist
from lib.ema import ema_update
from lib.mardiff import Diffusion, cosine_betas
from lib.marmodel import MAR, PRESETS


def mask_count(rng, seq_len):
    # MAR: mask ratio from a Gaussian with mean 1.0, std 0.25, truncated to [0.7, 1.0].
    while True:
        r = rng.normal(1.0, 0.25)
        if 0.7 <= r <= 1.0:
            return int(math.ceil(seq_len * r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="target", choices=sorted(PRESETS))
    ap.add_argument("--minutes", type=float, default=40)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--diffusion-batch-mul", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default="", help="comma-separated folders of marspec-generated PNGs "
                    "(NNNN_classC_*.png) to train on instead of Fashion-MNIST: distilling a draft "
                    "from the target's samples")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device(args.device)

    if args.data:
        images, labels = fmnist.load_generated(args.data.split(","))
        print(f"training on {len(images)} generated images from {args.data}", flush=True)
    else:
        images, labels = fmnist.load("train")
    tokens = fmnist.tokenize(images).to(dev)
    labels_t = torch.from_numpy(labels).to(dev)
    n, L, D = tokens.shape

    model = MAR(seq_len=L, token_dim=D, **PRESETS[args.preset]).to(dev)
    ema = MAR(seq_len=L, token_dim=D, **PRESETS[args.preset]).to(dev)
    ema.load_state_dict(model.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    params = sum(p.numel() for p in model.parameters())
    diff = Diffusion(cosine_betas(1000))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.02)

    budget = args.minutes * 60
    start = last_save = time.time()
    step, seen = 0, 0
    log = open(os.path.join(args.out, "train.log"), "a")
    run_loss = run_mse = 0.0
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        # warm-up then cosine decay over the wall-clock budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * elapsed / budget)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, n, (args.batch,), device=dev)
        x, y = tokens[idx], labels_t[idx]
        drop = (torch.rand(args.batch, device=dev) < 0.1).float()  # label dropout for CFG
        k = mask_count(rng, L)
        order = torch.argsort(torch.rand(args.batch, L, device=dev), dim=1)
        mask = torch.zeros(args.batch, L, device=dev)
        mask.scatter_(1, order[:, :k], 1.0)
        z = model.forward_drop(x, mask, y, drop)
        # loss only on masked positions; the head's batch repeated diffusion_batch_mul times
        sel = mask.reshape(-1) > 0.5
        zt = z.reshape(-1, z.shape[-1])[sel].repeat(args.diffusion_batch_mul, 1)
        x0 = x.reshape(-1, D)[sel].repeat(args.diffusion_batch_mul, 1)
        t = torch.randint(0, 1000, (x0.shape[0],), device=dev)
        loss, mse = diff.loss(model.diffloss.net, x0, t, zt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        opt.step()
        ema_update(ema, model, step, args.ema)
        step += 1
        seen += args.batch
        run_loss += loss.item()
        run_mse += mse.item()
        if step % 100 == 0:
            msg = dict(step=step, images=seen, minutes=round((time.time() - start) / 60, 2),
                       loss=round(run_loss / 100, 5), mse=round(run_mse / 100, 5), lr=lr,
                       img_per_s=round(seen / (time.time() - start), 1))
            print(json.dumps(msg), file=log, flush=True)
            run_loss = run_mse = 0.0
        if time.time() - last_save > 300:
            save(args, model, ema, step, seen, start, params)
            last_save = time.time()
    save(args, model, ema, step, seen, start, params)
    print(json.dumps(dict(done=True, step=step, images=seen, params=params)), file=log, flush=True)


def save(args, model, ema, step, seen, start, params):
    ck = dict(model=model.state_dict(), model_ema=ema.state_dict(),
              args=dict(vars(args), preset_config=PRESETS[args.preset]),
              step=step, images=seen, seconds=time.time() - start, params=params)
    tmp = os.path.join(args.out, "checkpoint-last.pth.tmp")
    torch.save(ck, tmp)
    os.replace(tmp, os.path.join(args.out, "checkpoint-last.pth"))


if __name__ == "__main__":
    main()
