"""A few-step head distilled by distribution matching from the frozen target's head.

The regression student of distill_head.py learns the endpoint of the teacher's deterministic
ODE (DDIM eta 0, 25 steps). That endpoint map carries the ODE's discretisation error, and an MSE
fit blurs what it cannot follow; ddim eta 1, the stochastic sampler, is 4 to 8 FID better here
(docs/FRONTIER.md). This script fine-tunes the same student, same graph and same K-step
sampler, toward the distribution the teacher's *score* defines, the distribution the stochastic
sampler approaches as its steps grow, instead of toward any one sampler's trajectories.

Objective: distribution matching distillation (DMD; MARVAL's one-step MAR head uses the same
idea, a guided score-based distribution match with the teacher as the score function and no
sampled trajectories). For a student sample x0, a random diffusion time tau and
x_tau = sqrt(abar) x0 + sqrt(1 - abar) n, the gradient of KL(student || teacher) with respect to
x0 is, up to a positive weight, the difference of two x0 predictions at x_tau:
    fake(x_tau) - real(x_tau)
where real is the frozen teacher head's guided prediction (eps_u + w (eps_c - eps_u), the score
the stochastic sampler follows) and fake is a second network trained online, by the ordinary
denoising loss, on the student's own samples (it tracks the student's score). For pixel tokens
both predictions are clipped (the sampler's law is the clipped denoiser's) and DMD's per-row
normaliser is dropped (dmd_grad says why); elsewhere it evens the scale over tau.

Status: tried first for the few-step head and NOT the pack's method. It passes the analytic test
(scripts/tests/test_head_matching.py), but on the embedded head every configuration tried moved
the student away from ddim eta 1 by the held-out check below (docs/models.md has the numbers):
the difference to resolve is small against the fake score's own fitting error on a CPU
budget. The pack's head comes from scripts/train/energy_head.py, which matches samples by the
energy score and needs no fake network. Kept for a GPU budget and for real checkpoints, where
the teacher's samples cost far more than its score.

Multi-step: the student's K-step sampler (K = 1, 2, 4, distill_head.STUDENT_TIMES) re-noises
its own x0 with fresh noise before each later step. Each training row is one step of one such
chain: its input is built by running the student's own earlier steps (no gradient; DMD2's
backward simulation), so every step is trained on the inputs it meets when sampling, and every
step's output is matched to the teacher's distribution.

Initialisation: the student starts from the pack's regression head (distilled_head.onnx, read
back into the same module); the fake network starts as the teacher's guided score plus a
zero-initialised correction (FakeScore). The held-out check and the run's plumbing are shared
with energy_head.py (lib/headchain.py).

  /usr/bin/python3 scripts/train/dmd_head.py --pack models/target --out runs/dmd-head --minutes 30
  /usr/bin/python3 scripts/train/dmd_head.py --export-only --ckpt runs/dmd-head/student-last.pth \
      --pack models/target --replace
"""
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import headchain as hc
from lib.ema import ema_update
from lib.marmodel import TimestepEmbedder
from train import distill_head as dh

TAU_MIN, TAU_MAX = 20, 980  # DMD's range of diffusion times for the score difference


class FakeScore(nn.Module):
    """The score of the student's own samples, as the teacher's guided epsilon plus a learned
    correction: a trainable copy of the teacher head (so its features start useful) with
    z_uncond and w added to its conditioning, and its output layer zeroed, so the fake starts
    equal to the real score and the DMD gradient starts at zero. Written so, the fake only has
    to learn how the student differs from the teacher, which is small for a student started
    from the regression head; a fake learnt from scratch (or from the teacher's conditional
    score) carries its own fitting error into every student update, amplified by sqrt(1-abar)
    / sqrt(abar) (about 30 at tau = 980 on the cosine schedule), and in a first trial here it
    drove the student away from the teacher within 150 updates."""

    def __init__(self, real_eps, teacher_net, z_width):
        super().__init__()
        self.real_eps = real_eps  # real_eps(x, t, z, z_uncond, cfg): the teacher's guided epsilon
        self.net = copy.deepcopy(teacher_net)
        for p in self.net.parameters():
            p.requires_grad_(True)
        width = self.net.cond_embed.out_features
        self.cfg_embed = TimestepEmbedder(width)
        self.stage_embed = TimestepEmbedder(width)
        self.uncond_embed = nn.Linear(z_width, width)
        for lin in [self.cfg_embed.mlp[2], self.stage_embed.mlp[2], self.uncond_embed,
                    self.net.final_layer.linear]:
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def correction(self, x, t, z, z_uncond, cfg, stage):
        n = self.net
        y = n.time_embed(t) + n.cond_embed(z) + self.cfg_embed((cfg - 1) * 100) + \
            self.uncond_embed(z_uncond) + self.stage_embed(stage)
        h = n.input_proj(x)
        for b in n.res_blocks:
            h = b(h, y)
        return n.final_layer(h, y)[:, :x.shape[1]]

    def forward(self, x, t, z, z_uncond, cfg, stage, real=None):
        """The fake epsilon of the samples the student's step at time `stage` makes (each step
        of the K-step chains has its own output law, and a score of their mixture would leave
        one step too narrow and another too wide while the mixture matched); real, the
        teacher's guided epsilon at x if already computed."""
        if real is None:
            with torch.no_grad():
                real = self.real_eps(x, t, z, z_uncond, cfg)
        return real + self.correction(x, t, z, z_uncond, cfg, stage)


def dmd_update(student, fake, opt, fake_opt, z, z_u, cfg, real_eps, clip, fake_updates, gen=None,
               straight_through=True, chain={}, box_weight=1.0):
    """One student update on a batch of contexts, after fake_updates updates of the fake score
    on the student's current samples (two time scales, as DMD2). real_eps(x, tau, z, z_u, cfg)
    is the teacher's guided epsilon. Returns (DMD loss, mean fake loss)."""
    x_in, t_in = hc.chain_inputs(student, z, z_u, cfg, clip, gen=gen, **chain)
    fake_loss = 0.0
    for _ in range(fake_updates):
        with torch.no_grad():
            x0 = student(x_in, t_in, z, z_u, cfg)
            x0 = x0.clamp(-1, 1) if clip else x0
        loss_f = denoising_loss(fake, x0, z, z_u, cfg, t_in, gen)
        fake_loss += hc.optimizer_step(fake_opt, fake.parameters(), loss_f) / max(1, fake_updates)
    raw = student(x_in, t_in, z, z_u, cfg)
    x0 = hc.clip_output(raw, clip, straight_through)
    n = x0.shape[0]
    tau = torch.randint(TAU_MIN, TAU_MAX + 1, (n,), generator=gen)
    with torch.no_grad():
        tf = tau.float()
        g = dmd_grad(x0.detach(), tau, torch.randn(x0.shape, generator=gen),
                     lambda x: real_eps(x, tf, z, z_u, cfg),
                     lambda x, real: fake(x, tf, z, z_u, cfg, t_in, real), clip)
    loss = 0.5 * ((x0 - (x0 - g).detach()) ** 2).sum(dim=1).mean()
    loss = hc.with_bound_penalty(loss, raw, clip, box_weight)
    return hc.optimizer_step(opt, student.parameters(), loss), fake_loss


def dmd_grad(x0, tau, noise, real_eps, fake_eps, clip=False):
    """DMD's gradient at x0 [N,D] (no graph): (fake - real) x0 predictions at the noised x0,
    each row normalised by mean|x0 - real prediction|. real_eps(x_tau) and fake_eps(x_tau,
    real_eps's answer) are the two epsilons."""
    acp = torch.from_numpy(dh.BASE.acp).float()[tau][:, None]
    a, s = acp.sqrt(), (1 - acp).sqrt()
    x_tau = a * x0 + s * noise
    eps_real = real_eps(x_tau)
    p_real = (x_tau - s * eps_real) / a
    p_fake = (x_tau - s * fake_eps(x_tau, eps_real)) / a
    if clip:
        # the sampler to match clips the teacher's x0 prediction at every step (pixel tokens;
        # notes §5), so its law is the clipped denoiser's, not the raw score's: against the raw
        # one the student drifted from ddim eta 1 here. Clipping also bounds the predictions,
        # which at tau = 980 divide the epsilons' difference by sqrt(abar) ~ 0.03
        p_real, p_fake = p_real.clamp(-1, 1), p_fake.clamp(-1, 1)
        # and no per-row normaliser: over a 16-dim token it is noisy, and it vanishes where
        # x0 and the prediction clip to the same bound (weights of 1e4 came out here); the
        # clipped difference is bounded, and Adam takes out the overall scale
        return p_fake - p_real
    weight = 1.0 / (x0 - p_real).abs().mean(dim=1, keepdim=True).clamp_min(1e-5)
    return (p_fake - p_real) * weight


def denoising_loss(fake, x0, z, z_u, cfg, stage, gen=None):
    """The fake score's loss: epsilon MSE on the student's samples at uniform diffusion times."""
    n = x0.shape[0]
    tau = torch.randint(0, dh.TRAIN_STEPS, (n,), generator=gen)
    noise = torch.randn(x0.shape, generator=gen)
    acp = torch.from_numpy(dh.BASE.acp).float()[tau][:, None]
    x_tau = acp.sqrt() * x0 + (1 - acp).sqrt() * noise
    return ((fake(x_tau, tau.float(), z, z_u, cfg, stage) - noise) ** 2).mean()









def train(args):
    r = hc.Run(args)
    real_eps = lambda x, tau, z, z_u, cfg: hc.guided_eps(r.net, x, tau, z, z_u, cfg)
    fake = FakeScore(real_eps, r.net, r.mar.class_emb.weight.shape[1])
    opt = torch.optim.AdamW(r.student.parameters(), lr=args.lr, betas=(args.beta1, 0.99), weight_decay=0.0)
    fake_opt = torch.optim.AdamW(fake.parameters(), lr=args.fake_lr, betas=(args.beta1, 0.99), weight_decay=0.0)
    chain = dict(stage_probs=[float(v) for v in args.stage_probs.split(",")], k2_share=args.k2_share)
    warm = fake_warmup(args, r.student, fake, fake_opt, r.mar, r.tokens, r.labels, r.clip, chain)
    r.note(fake_warmup=args.fake_warmup, fake_loss=warm, minutes=r.minutes())
    step = chunks = 0
    run = {"gen": 0.0, "fake": 0.0}
    while r.minutes() < args.minutes and (not args.max_steps or step < args.max_steps):
        idx = torch.randint(0, r.tokens.shape[0], (args.images,))
        with torch.no_grad():
            cz, cz_u, ccfg = dh.contexts(r.mar, r.tokens[idx], r.labels[idx], args.per_image)
        chunks += 1
        n = cz.shape[0]
        for _ in range(args.reuse * n // args.batch):
            if r.minutes() >= args.minutes or (args.max_steps and step >= args.max_steps):
                break
            i = torch.randint(0, n, (args.batch,))
            for grp in opt.param_groups:
                grp["lr"] = args.lr * min(1.0, (step + 1) / args.warmup)
            loss, loss_f = dmd_update(r.student, fake, opt, fake_opt, cz[i], cz_u[i], ccfg[i], real_eps,
                                      r.clip, args.fake_updates, straight_through=not args.clip_stops_grad,
                                      chain=chain, box_weight=args.box_weight)
            ema_update(r.ema, r.student, step, args.ema)
            step += 1
            run["gen"] += loss
            run["fake"] += loss_f
            if step % args.log_every == 0:
                r.note(step=step, minutes=r.minutes(), chunks=chunks, dmd=round(run["gen"] / args.log_every, 5),
                       fake_loss=round(run["fake"] / args.log_every, 5),
                       heldout_ema=r.held.student(r.ema), heldout_raw=r.held.student(r.student))
                run = {"gen": 0.0, "fake": 0.0}
        if args.save_every and chunks % args.save_every == 0:
            r.save(step, method_text(args), fake=fake.state_dict())
    final = r.held.student(r.ema)
    path = r.save(step, method_text(args), final, fake=fake.state_dict())
    r.note(done=True, step=step, heldout_final=final, ckpt=path)
    return path


def fake_warmup(args, student, fake, fake_opt, mar, tokens, labels, clip, chain):
    """Fits the fake score to the initial student's samples before the student moves: it starts
    as the teacher's *conditional* score, far from a guided student's, and DMD's first updates
    would follow that mismatch. Returns the mean loss of the last 100 updates."""
    losses = []
    for step in range(args.fake_warmup):
        if step % (args.reuse * args.images * args.per_image // args.batch) == 0:
            idx = torch.randint(0, tokens.shape[0], (args.images,))
            with torch.no_grad():
                cz, cz_u, ccfg = dh.contexts(mar, tokens[idx], labels[idx], args.per_image)
        i = torch.randint(0, cz.shape[0], (args.batch,))
        z, z_u, cfg = cz[i], cz_u[i], ccfg[i]
        x_in, t_in = hc.chain_inputs(student, z, z_u, cfg, clip, **chain)
        with torch.no_grad():
            x0 = student(x_in, t_in, z, z_u, cfg)
            x0 = x0.clamp(-1, 1) if clip else x0
        losses.append(hc.optimizer_step(fake_opt, fake.parameters(), denoising_loss(fake, x0, z, z_u, cfg, t_in)))
    return round(sum(losses[-100:]) / max(1, len(losses[-100:])), 5)


def method_text(args):
    return ("distribution matching (DMD) against the frozen head's guided score, fine-tuned from "
            f"the regression head; the student's own K-step chains as inputs; fake score "
            f"{args.fake_updates} updates per student update; contexts from fashion-mnist train, "
            f"unknown count uniform 1..49, w ~ U[1,{dh.CFG_MAX:g}] ({dh.UNGUIDED:g} unguided)")


def main():
    ap = hc.arguments(__doc__.split("\n")[0], minutes=30)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--fake-lr", type=float, default=5e-5)
    ap.add_argument("--beta1", type=float, default=0.9, help="Adam's beta1 for both networks")
    ap.add_argument("--fake-updates", type=int, default=2, help="fake-score updates per student update")
    ap.add_argument("--warmup", type=int, default=100, help="student learning-rate warm-up updates")
    ap.add_argument("--fake-warmup", type=int, default=400, help="fake-score updates before the student moves")
    ap.add_argument("--images", type=int, default=64, help="context images per transformer chunk")
    ap.add_argument("--per-image", type=int, default=16)
    ap.add_argument("--reuse", type=int, default=8, help="passes over each chunk of contexts")
    ap.add_argument("--log-every", type=int, default=250)
    ap.add_argument("--save-every", type=int, default=20, help="chunks between checkpoints")
    ap.add_argument("--clip-stops-grad", action="store_true", help="the clip's own gradient (zero past the "
                    "bounds) instead of passing the gradient through it")
    hc.run_main(ap, train)


if __name__ == "__main__":
    main()
