"""Early-exit self-draft for a frozen MAR target: the target's first k encoder blocks plus a
small trained exit (in the spirit of SpecBound) predict z for every position, with a per-position
confidence; the rest of the target continues the same hidden state, so no block runs twice.

Train (the target stays frozen; its checkpoint comes from scripts/packs/ckpt_from_pack.py):
  /usr/bin/python3 scripts/train/early_exit.py --depth 2 --minutes 25 --threads 1 --out runs/exit-d2 \
      [--target-ckpt runs/target-rebuilt/checkpoint-last.pth] [--pack models/target]
Export a trained exit into a pack (adds exit_draft.onnx, exit_rest.onnx and manifest "early_exit"):
  /usr/bin/python3 scripts/train/early_exit.py --export-only --ckpt runs/exit-d2/exit-last.pth \
      --pack models/target

Graphs (opset 17, batch axis B dynamic):
  exit_draft.onnx: tokens [B,49,16], mask [B,49] (1 = unknown), class_ids [B] int64,
                   drop_class [B] -> z_exit [B,49,W], exit_logvar [B,49], hidden [B,53,W]
  exit_rest.onnx:  hidden [B,53,W], mask [B,49] -> z [B,49,W], the target's own z
exit_logvar predicts log(mean over W of (z_exit - z)^2) at each position (--conf z, the
default), or log of the head-output error below (--conf head).

Head-output loss (--head-loss W > 0): acceptance depends on how the frozen diffusion head
reacts to z_exit versus z, not on raw z distance, so at each unknown position draw t uniform
over the 1000 training steps, x_t ~ q(x_t | x_0 = the data token) (cosine schedule), and add
W * mean_D[(eps(x_t,t,z_exit) - eps(x_t,t,z))^2 + v_w (v(..z_exit) - v(..z))^2] to the loss.
Fine-tune an existing exit with --init:
  /usr/bin/python3 scripts/train/early_exit.py --depth 1 --init runs/exit-d1/exit-last.pth \
      --head-loss 1 --minutes 22 --threads 1 --out runs/exit-d1h
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.ema import ema_update
from train.frozen_target import load_target, sample_masks
from lib.mardiff import Diffusion, cosine_betas, space_timesteps
from lib.marmodel import Block

HELDOUT = 512  # test images in the batch logged during training
FINAL_HELDOUT = 2048  # test images behind the numbers written to the checkpoint and manifest
TRAIN_STEPS = 1000  # the head's training schedule (train.py: Diffusion(cosine_betas(1000)))
DIFFUSION = Diffusion(cosine_betas(TRAIN_STEPS))
SAMPLER_STEPS = 50  # the respaced schedule the sampler walks (mardiff.Diffusion.respaced)


def head_t_weights(dist):
    """Probabilities over the 1000 training steps for the head loss's t (--head-t-dist).
    uniform: every step; sampler: only the 50 steps the respaced sampler visits, equally;
    late: those 50 steps with p(t) proportional to 1/sqrt(1 - alphabar_t), so the small-t steps,
    where the last-step Gaussian is narrow, are drawn most (the square root because the plain
    1/(1 - alphabar_t) puts 96% of the draws on t = 0 alone)."""
    if dist == "uniform":
        return torch.full((TRAIN_STEPS,), 1.0 / TRAIN_STEPS)
    w = torch.zeros(TRAIN_STEPS, dtype=torch.float64)
    keep = torch.tensor(space_timesteps(TRAIN_STEPS, SAMPLER_STEPS))
    if dist == "sampler":
        w[keep] = 1.0
    elif dist == "late":
        w[keep] = (1.0 - torch.from_numpy(DIFFUSION.acp)[keep].double()).rsqrt()
    else:
        raise ValueError(f"head t distribution {dist!r}: allowed uniform, sampler, late")
    return (w / w.sum()).float()


class ExitHead(nn.Module):
    """A shortened decoder on the early hidden state: initialised from the target's
    encoder_norm, decoder_embed, mask token, decoder positions, first decoder blocks and
    decoder_norm, so training starts from the target's own decoder with the middle cut out."""

    def __init__(self, width, heads, seq_len, buffer_size, exit_blocks):
        super().__init__()
        self.buffer_size = buffer_size
        self.norm = nn.LayerNorm(width, eps=1e-6)
        self.proj = nn.Linear(width, width)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.zeros(1, seq_len + buffer_size, width))
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(exit_blocks)])
        self.out_norm = nn.LayerNorm(width, eps=1e-6)
        self.diffusion_pos_embed = nn.Parameter(torch.zeros(1, seq_len, width))
        self.logvar = nn.Linear(width, 1)

    @classmethod
    def from_target(cls, mar, exit_blocks):
        width = mar.class_emb.weight.shape[1]
        heads = mar.decoder_blocks[0].attn.heads
        if exit_blocks > len(mar.decoder_blocks):
            raise ValueError(f"--exit-blocks {exit_blocks}: the target has only "
                             f"{len(mar.decoder_blocks)} decoder blocks to start from")
        ex = cls(width, heads, mar.seq_len, mar.buffer_size, exit_blocks)
        with torch.no_grad():
            ex.norm.load_state_dict(mar.encoder_norm.state_dict())
            ex.proj.load_state_dict(mar.decoder_embed.state_dict())
            ex.mask_token.copy_(mar.mask_token)
            ex.pos_embed.copy_(mar.decoder_pos_embed_learned)
            for i, blk in enumerate(ex.blocks):
                blk.load_state_dict(mar.decoder_blocks[i].state_dict())
            ex.out_norm.load_state_dict(mar.decoder_norm.state_dict())
            ex.diffusion_pos_embed.copy_(mar.diffusion_pos_embed_learned)
            nn.init.zeros_(ex.logvar.weight)
            nn.init.zeros_(ex.logvar.bias)
        return ex

    def forward(self, hidden, mask):
        full_mask = torch.cat([torch.zeros(mask.shape[0], self.buffer_size), mask], dim=1)
        x = self.proj(self.norm(hidden))
        m = full_mask[:, :, None]
        x = x * (1 - m) + self.mask_token * m
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        feat = self.out_norm(x)[:, self.buffer_size:]
        return feat + self.diffusion_pos_embed, self.logvar(feat).squeeze(-1)


class DraftGraph(nn.Module):
    def __init__(self, mar, exit_head, depth):
        super().__init__()
        self.mar, self.exit_head, self.depth = mar, exit_head, depth

    def forward(self, tokens, mask, class_ids, drop_class):
        h = self.mar.encode_until(tokens, mask, class_ids, drop_class, self.depth)
        z_exit, logvar = self.exit_head(h, mask)
        return z_exit, logvar, h


class RestGraph(nn.Module):
    def __init__(self, mar, depth):
        super().__init__()
        self.mar, self.depth = mar, depth

    def forward(self, hidden, mask):
        return self.mar.finish_from(hidden, mask, self.depth)


def exit_outputs(mar, ex, depth, tokens, mask, ids, drop):
    """z_exit and predicted log error (with grad through the exit), and the target's z."""
    with torch.no_grad():
        h = mar.encode_until(tokens, mask, ids, drop, depth)
        z = mar.finish_from(h, mask, depth)
    z_exit, s = ex(h, mask)
    return z_exit, s, z


def exit_errors(mar, ex, depth, tokens, mask, ids, drop):
    """Per-position e = mean_W (z_exit - z)^2, predicted log e, and mean_W z^2 of the target."""
    z_exit, s, z = exit_outputs(mar, ex, depth, tokens, mask, ids, drop)
    e = ((z_exit - z) ** 2).mean(-1)
    return e, s, (z ** 2).mean(-1)


def head_errors(net, x0, z_exit, z, n_t=1, v_weight=0.1, gen=None, t_weights=None):
    """Per-position mean_D over the frozen head's outputs of (eps_exit - eps)^2 +
    v_weight (v_exit - v)^2 at n_t draws of t ~ U{0..999} (or ~ t_weights, head_t_weights),
    x_t ~ q(x_t | x0); averaged over the draws. x0, z_exit, z: [N, D], [N, W], [N, W]; gradient flows into z_exit only."""
    n, d = x0.shape
    x0r, zer, zr = x0.repeat(n_t, 1), z_exit.repeat(n_t, 1), z.repeat(n_t, 1)
    if t_weights is None:
        t = torch.randint(0, TRAIN_STEPS, (n * n_t,), generator=gen)
    else:
        t = torch.multinomial(t_weights, n * n_t, replacement=True, generator=gen)
    xt = DIFFUSION.q_sample(x0r, t, torch.randn(x0r.shape, generator=gen))
    with torch.no_grad():
        ref = net(xt, t, zr)
    out = net(xt, t, zer)
    err = ((out[:, :d] - ref[:, :d]) ** 2).mean(-1) + \
        v_weight * ((out[:, d:] - ref[:, d:]) ** 2).mean(-1)
    return err.reshape(n_t, n).mean(0)


def heldout_batch(n, seq_len, seed=1234):
    from lib import fmnist

    images, labels = fmnist.load("test")
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(images), generator=gen)[:n].numpy()
    tokens = fmnist.tokenize(images[idx])
    ids = torch.from_numpy(labels[idx])
    drop = (torch.rand(n, generator=gen) < 0.1).float()
    return tokens, sample_masks(n, seq_len, gen), ids, drop


def evaluate(mar, ex, depth, batch, chunk=256, v_weight=0.1):
    """Relative MSE (mean e / mean z^2 over unknown positions) and corr(s, log e) there; the
    mean head-output error (head_errors, 2 fixed-seed draws of t and noise per position) and
    corr(s, log head error)."""
    tokens, mask, ids, drop = batch
    gen = torch.Generator().manual_seed(4321)  # the same t and noise at every evaluation
    es, ss, zs, hs = [], [], [], []
    with torch.no_grad():
        for i in range(0, tokens.shape[0], chunk):
            sl = slice(i, i + chunk)
            z_exit, s, z = exit_outputs(mar, ex, depth, tokens[sl], mask[sl], ids[sl], drop[sl])
            sel = mask[sl] > 0.5
            e = ((z_exit - z) ** 2).mean(-1)
            es.append(e[sel]), ss.append(s[sel]), zs.append((z ** 2).mean(-1)[sel])
            hs.append(head_errors(mar.diffloss.net, tokens[sl][sel], z_exit[sel], z[sel],
                                  n_t=2, v_weight=v_weight, gen=gen))
    e, s, z2, he = torch.cat(es), torch.cat(ss), torch.cat(zs), torch.cat(hs)
    # None while s is still constant (at initialisation): no correlation is defined
    def corr(err):
        return None if float(s.std()) == 0 else \
            round(float(np.corrcoef(s.numpy(), torch.log(err).numpy())[0, 1]), 4)
    return dict(relative_mse=round(float(e.mean() / z2.mean()), 5), logvar_corr=corr(e),
                mse=round(float(e.mean()), 6), head_err=round(float(he.mean()), 6),
                logvar_corr_head=corr(he))


def train(args):
    from lib import fmnist

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    mar, _ = load_target(args.target_ckpt)
    if not 1 <= args.depth <= len(mar.encoder_blocks):
        raise SystemExit(f"--depth {args.depth}: allowed 1..{len(mar.encoder_blocks)} "
                         "(the target's encoder blocks)")
    ex = ExitHead.from_target(mar, args.exit_blocks)
    ema = ExitHead.from_target(mar, args.exit_blocks)
    if args.init:
        init = torch.load(args.init, map_location="cpu")
        if (init["depth"], init["exit_blocks"]) != (args.depth, args.exit_blocks):
            raise SystemExit(f"--init {args.init}: depth {init['depth']}, exit_blocks "
                             f"{init['exit_blocks']}; allowed only the run's --depth "
                             f"{args.depth} and --exit-blocks {args.exit_blocks}")
        # both start from the EMA weights: the exit that was measured and exported
        ex.load_state_dict(init["exit"])
        ema.load_state_dict(init["exit"])
    for p in ema.parameters():
        p.requires_grad_(False)
    net = mar.diffloss.net
    images, labels = fmnist.load("train")
    tokens, labels_t = fmnist.tokenize(images), torch.from_numpy(labels)
    n, L, _ = tokens.shape
    held = heldout_batch(HELDOUT, L)
    opt = torch.optim.AdamW(ex.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.02)
    log = open(os.path.join(args.out, "train.log"), "a")

    def note(**kv):
        print(json.dumps(kv), file=log, flush=True)

    note(start=True, depth=args.depth, exit_blocks=args.exit_blocks, minutes=args.minutes,
         threads=args.threads, batch=args.batch, params=sum(p.numel() for p in ex.parameters()),
         target=args.target_ckpt, init=args.init, head_loss=args.head_loss, head_t=args.head_t,
         head_v=args.head_v, head_t_dist=args.head_t_dist, conf=args.conf, lr=args.lr,
         **{"heldout_at_init": evaluate(mar, ema, args.depth, held, v_weight=args.head_v)})
    t_weights = None if args.head_t_dist == "uniform" else head_t_weights(args.head_t_dist)
    budget = args.minutes * 60
    start = last_save = time.time()
    step, run_loss, run_e, run_h = 0, 0.0, 0.0, 0.0
    warned = False
    while time.time() - start < budget:
        elapsed = time.time() - start
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * elapsed / budget)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, n, (args.batch,))
        drop = (torch.rand(args.batch) < 0.1).float()  # CFG's unconditional branch too
        mask = sample_masks(args.batch, L)
        z_exit, s, z = exit_outputs(mar, ex, args.depth, tokens[idx], mask, labels_t[idx], drop)
        sel = mask > 0.5
        z_exit, s, z = z_exit[sel], s[sel], z[sel]
        e = ((z_exit - z) ** 2).mean(-1)
        loss = e.mean()  # the MSE trains z_exit
        h = None
        if args.head_loss > 0 or args.conf == "head":
            h = head_errors(net, tokens[idx][sel], z_exit, z, args.head_t, args.head_v,
                            t_weights=t_weights)
            if args.head_loss > 0:
                loss = loss + args.head_loss * h.mean()
        if step == 0:
            note(step=0, z_mse=round(e.mean().item(), 6),
                 head_err=None if h is None else round(h.mean().item(), 6),
                 head_term=None if h is None else round(args.head_loss * h.mean().item(), 6))
        # the Gaussian NLL on the (stopped) error trains s toward log e (or log head error)
        target = h if args.conf == "head" else e
        loss = loss + (target.detach() * torch.exp(-s) + s).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ex.parameters(), 3.0)
        opt.step()
        ema_update(ema, ex, step, args.ema)
        step += 1
        run_loss += loss.item()
        run_e += e.mean().item()
        run_h += 0.0 if h is None else h.mean().item()
        if step == 50 and not warned:
            projected = int(step * budget / (time.time() - start))
            if projected < 2000:
                note(warning=f"slow: {projected} steps projected in {args.minutes} minutes (< 2000)")
            warned = True
        if step % args.log_every == 0:
            note(step=step, minutes=round((time.time() - start) / 60, 2), lr=lr,
                 loss=round(run_loss / args.log_every, 5), mse=round(run_e / args.log_every, 6),
                 head_err=round(run_h / args.log_every, 6),
                 heldout_ema=evaluate(mar, ema, args.depth, held, v_weight=args.head_v))
            run_loss = run_e = run_h = 0.0
        if time.time() - last_save > 300:
            save(args, ex, ema, step, start, None)
            last_save = time.time()
    final = evaluate(mar, ema, args.depth, heldout_batch(FINAL_HELDOUT, L, seed=99),
                     v_weight=args.head_v)
    path = save(args, ex, ema, step, start, final)
    note(done=True, step=step, heldout_final=final, ckpt=path)
    return path


def save(args, ex, ema, step, start, heldout):
    ck = dict(exit=ema.state_dict(), exit_raw=ex.state_dict(), depth=args.depth,
              exit_blocks=args.exit_blocks, minutes=round((time.time() - start) / 60, 1),
              steps=step, heldout=heldout, target_ckpt=args.target_ckpt, args=vars(args))
    path = os.path.join(args.out, "exit-last.pth")
    torch.save(ck, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def export_graphs(mar, ex, depth, out):
    """Writes exit_draft.onnx and exit_rest.onnx into out; returns their paths."""
    b, L, D = 2, mar.seq_len, mar.token_dim
    tokens = torch.randn(b, L, D)
    mask = torch.ones(b, L)
    mask[0, :10] = 0
    ids = torch.tensor([1, 2], dtype=torch.int64)
    drop = torch.zeros(b)
    draft = os.path.join(out, "exit_draft.onnx")
    rest = os.path.join(out, "exit_rest.onnx")
    mar.eval(), ex.eval()
    with torch.no_grad():
        torch.onnx.export(DraftGraph(mar, ex, depth), (tokens, mask, ids, drop), draft,
                          opset_version=17,
                          input_names=["tokens", "mask", "class_ids", "drop_class"],
                          output_names=["z_exit", "exit_logvar", "hidden"],
                          dynamic_axes={k: {0: "B"} for k in ["tokens", "mask", "class_ids",
                                                               "drop_class", "z_exit",
                                                               "exit_logvar", "hidden"]})
        h = mar.encode_until(tokens, mask, ids, drop, depth)
        torch.onnx.export(RestGraph(mar, depth), (h, mask), rest, opset_version=17,
                          input_names=["hidden", "mask"], output_names=["z"],
                          dynamic_axes={k: {0: "B"} for k in ["hidden", "mask", "z"]})
    W, H = ex.diffusion_pos_embed.shape[-1], ex.pos_embed.shape[1]
    _name_output_dims(draft, {"z_exit": [L, W], "exit_logvar": [L], "hidden": [H, W]})
    _name_output_dims(rest, {"z": [L, W]})
    return draft, rest


def _name_output_dims(path, dims):
    """torch.onnx leaves symbolic names like 'Addz_dim_1' on outputs' fixed axes; write the
    sizes instead, so a reader of the graph sees [B, 49, W] without running it."""
    import onnx

    model = onnx.load(path)
    for out in model.graph.output:
        axes = out.type.tensor_type.shape.dim
        for axis, size in zip(axes[1:], dims[out.name]):
            axis.dim_value = size
    onnx.checker.check_model(model)
    onnx.save(model, path)


def check_split(mar, depth, b=8, seed=0):
    """max |finish_from(encode_until(x)) - forward_keep(x)| on random inputs with per-row masks."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randn(b, mar.seq_len, mar.token_dim, generator=gen)
    mask = sample_masks(b, mar.seq_len, gen)
    mask[0] = 1  # nothing known
    ids = torch.randint(0, mar.class_emb.weight.shape[0], (b,), generator=gen)
    drop = (torch.arange(b) % 2).float()
    with torch.no_grad():
        z = mar.forward_keep(tokens, mask, ids, drop)
        z2 = mar.finish_from(mar.encode_until(tokens, mask, ids, drop, depth), mask, depth)
    return (z - z2).abs().max().item()


def export_into_pack(ck_path, pack, target_ckpt=None):
    ck = torch.load(ck_path, map_location="cpu")
    mar, _ = load_target(target_ckpt or ck["target_ckpt"])
    ex = ExitHead.from_target(mar, ck["exit_blocks"])
    ex.load_state_dict(ck["exit"])
    depth = ck["depth"]
    diff = check_split(mar, depth)
    if diff > 1e-5:
        raise SystemExit(f"exit_rest(hidden) differs from the target's z by {diff:.3g} (> 1e-5)")
    draft, rest = export_graphs(mar, ex, depth, pack)
    manifest_path = os.path.join(pack, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    heldout = ck.get("heldout") or evaluate(mar, ex, depth, heldout_batch(FINAL_HELDOUT, mar.seq_len, seed=99))
    manifest["early_exit"] = {
        "depth": depth,
        "blocks": len(mar.encoder_blocks) + len(mar.decoder_blocks),
        "exit_blocks": ck["exit_blocks"],
        "draft": os.path.basename(draft),
        "rest": os.path.basename(rest),
        "hidden_len": mar.seq_len + mar.buffer_size,
        "training": {"data": "fashion-mnist train (60k), frozen target, unknown count per row "
                             "uniform in 1..49, class drop 0.1",
                     "minutes": ck["minutes"], "steps": ck["steps"],
                     "relative_mse": heldout["relative_mse"], "logvar_corr": heldout["logvar_corr"]},
    }
    run = ck.get("args") or {}
    if run.get("init") or run.get("head_loss") or run.get("conf", "z") != "z":
        # fine-tuned / head-loss exits say so; older checkpoints keep the entry as it was
        manifest["early_exit"]["training"].update(
            init=run.get("init"), head_loss=run.get("head_loss"), head_t=run.get("head_t"),
            head_v=run.get("head_v"), logvar_predicts=run.get("conf", "z"),
            head_err=heldout.get("head_err"), logvar_corr_head=heldout.get("logvar_corr_head"))
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(json.dumps(dict(split_max_diff=diff, pack=pack, early_exit=manifest["early_exit"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=2, help="target encoder blocks before the exit")
    ap.add_argument("--exit-blocks", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=25)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--log-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-ckpt", default="runs/target-rebuilt/checkpoint-last.pth")
    ap.add_argument("--out", help="training run folder (train.log, exit-last.pth)")
    ap.add_argument("--pack", help="pack to add the exit graphs to (after training, or with --export-only)")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--init", help="exit checkpoint to start training from (same depth and "
                                   "exit blocks); default: the target's own decoder")
    ap.add_argument("--head-loss", type=float, default=0.0,
                    help="weight of the frozen head's output error under z_exit vs z "
                         "(0 = z-MSE only)")
    ap.add_argument("--head-t", type=int, default=1, help="draws of t per position (head loss)")
    ap.add_argument("--head-t-dist", choices=["uniform", "sampler", "late"], default="uniform",
                    help="t for the head loss during training: uniform over the 1000 training "
                    "steps; sampler = only the 50 steps the respaced sampler visits, equally; "
                    "late = those 50 with p(t) proportional to 1/sqrt(1-alphabar_t), favouring the "
                    "small-t steps (t=0 gets ~54%%). The held-out head_err stays uniform for comparability")
    ap.add_argument("--head-v", type=float, default=0.1,
                    help="weight of the head's v output relative to eps in the head error")
    ap.add_argument("--conf", choices=["z", "head"], default="z",
                    help="what exit_logvar predicts: log z error (z) or log head-output error")
    ap.add_argument("--ckpt", help="exit checkpoint to export (--export-only)")
    args = ap.parse_args()
    if args.export_only:
        if not args.ckpt or not args.pack:
            ap.error("--export-only needs --ckpt and --pack")
        export_into_pack(args.ckpt, args.pack, args.target_ckpt)
        return
    if not args.out:
        ap.error("training needs --out")
    path = train(args)
    if args.pack:
        export_into_pack(path, args.pack, args.target_ckpt)


if __name__ == "__main__":
    main()
