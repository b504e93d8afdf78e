"""A few-step head distilled by distribution matching from the frozen target's head (issue 26).

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
denoising loss, on the student's own samples (it tracks the student's score). DMD's per-row
normaliser 1 / mean|x0 - real(x_tau)| evens the scale over tau. Why this over the alternatives
the issue names: consistency training toward ddim eta 1 has no deterministic map to regress on
(eta 1 draws fresh noise each step), and SiD needs the gradient through the fake network, twice
the cost per update on a CPU budget of an hour; DMD needs only forward calls of both score
networks at x_tau, and the head is small enough that the fake network is cheap to keep current.

Multi-step: the student's K-step sampler (K = 1, 2, 4, distill_head.STUDENT_TIMES) re-noises
its own x0 with fresh noise before each later step. Each training row is one step of one such
chain: its input is built by running the student's own earlier steps (no gradient; DMD2's
backward simulation), so every step is trained on the inputs it meets when sampling, and every
step's output is matched to the teacher's distribution.

Initialisation: the student starts from the pack's regression head (distilled_head.onnx, read
back into the same module), so it starts as a good few-step sampler of the ODE's distribution;
the fake network starts as the teacher head (as in DMD), with the student's extra conditioning
(z_uncond, w) entering through zero-initialised embeddings.

Held-out check (printed to the log and written into the manifest entry): on contexts from
Fashion-MNIST test images, S samples per context from each sampler, and the energy distance per
context to the teacher's ddim eta 1 in 25 steps (the `quality` head sampler), averaged; beside it
the same sampler against itself with other noise (the noise floor of the check), the teacher's
ODE in 25 steps (what the regression student imitates) and the student at K = 1, 2, 4.

  /usr/bin/python3 scripts/train/dmd_head.py --pack models/target --out runs/dmd-head --minutes 50
  /usr/bin/python3 scripts/train/dmd_head.py --export-only --ckpt runs/dmd-head/student-last.pth \
      --pack models/target --replace
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.ema import ema_update
from lib.marmodel import TimestepEmbedder
from lib.mardiff import Diffusion
from train import distill_head as dh

TIMES = dh.STUDENT_TIMES[4]  # 999, 749, 500, 250: every step of every K-step chain
STAGE_PROBS = [0.4, 0.2, 0.2, 0.2]  # t = 999 is K = 1's only step and the first of every K
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


def guided_eps(net, x, t, z, z_uncond, cfg):
    """The teacher's guided epsilon eps_u + w (eps_c - eps_u) (rows with w = 1 pass z_uncond = z)."""
    d = x.shape[1]
    e = net(x, t, z)[:, :d]
    eu = net(x, t, z_uncond)[:, :d]
    return eu + cfg[:, None] * (e - eu)


@torch.no_grad()
def chain_inputs(student, z, z_u, cfg, clip, gen=None):
    """Each row's input state and time: a stage of a K-step chain drawn with STAGE_PROBS, the
    input built by the student's own earlier steps with fresh re-noising (K = 4 visits every
    time; the state at t = 500 comes half from K = 2's chain, straight after t = 999)."""
    n, d = z.shape[0], student.token_dim
    base = dh.BASE

    def step(x, t):
        x0 = student(x, torch.full((n,), float(t)), z, z_u, cfg)
        return x0.clamp(-1, 1) if clip else x0

    def renoise(x0, t):
        return float(base.sqrt_acp[t]) * x0 + float(base.sqrt_1m_acp[t]) * \
            torch.randn(n, d, generator=gen)

    x999 = torch.randn(n, d, generator=gen)
    a0 = step(x999, 999)
    x749 = renoise(a0, 749)
    x500_k4 = renoise(step(x749, 749), 500)
    x250 = renoise(step(x500_k4, 500), 250)
    x500_k2 = renoise(a0, 500)
    half = torch.rand(n, generator=gen) < 0.5
    x500 = torch.where(half[:, None], x500_k2, x500_k4)
    stage = torch.multinomial(torch.tensor(STAGE_PROBS), n, replacement=True, generator=gen)
    states = torch.stack([x999, x749, x500, x250])
    return states[stage, torch.arange(n)], torch.tensor(TIMES, dtype=torch.float32)[stage]


def dmd_update(student, fake, opt, fake_opt, z, z_u, cfg, real_eps, clip, fake_updates, gen=None,
               straight_through=True):
    """One student update on a batch of contexts, after fake_updates updates of the fake score
    on the student's current samples (two time scales, as DMD2). real_eps(x, tau, z, z_u, cfg)
    is the teacher's guided epsilon. Returns (DMD loss, mean fake loss)."""
    x_in, t_in = chain_inputs(student, z, z_u, cfg, clip, gen)
    fake_loss = 0.0
    for _ in range(fake_updates):
        with torch.no_grad():
            x0 = student(x_in, t_in, z, z_u, cfg)
            x0 = x0.clamp(-1, 1) if clip else x0
        loss_f = denoising_loss(fake, x0, z, z_u, cfg, t_in, gen)
        fake_opt.zero_grad(set_to_none=True)
        loss_f.backward()
        torch.nn.utils.clip_grad_norm_(fake.parameters(), 1.0)
        fake_opt.step()
        fake_loss += loss_f.item() / max(1, fake_updates)
    raw = student(x_in, t_in, z, z_u, cfg)
    if clip and straight_through:  # the sampler clips; the gradient passes the clip
        x0 = raw + (raw.clamp(-1, 1) - raw).detach()
    else:
        x0 = raw.clamp(-1, 1) if clip else raw
    n = x0.shape[0]
    tau = torch.randint(TAU_MIN, TAU_MAX + 1, (n,), generator=gen)
    with torch.no_grad():
        tf = tau.float()
        g = dmd_grad(x0.detach(), tau, torch.randn(x0.shape, generator=gen),
                     lambda x: real_eps(x, tf, z, z_u, cfg),
                     lambda x, real: fake(x, tf, z, z_u, cfg, t_in, real), clip)
    loss = 0.5 * ((x0 - (x0 - g).detach()) ** 2).sum(dim=1).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
    opt.step()
    return loss.item(), fake_loss


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


def load_onnx_student(path):
    """The regression student back from distilled_head.onnx: its initialisers carry the module's
    state-dict names (the export keeps them), so the weights load without its checkpoint."""
    import onnx
    from onnx import numpy_helper

    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
               for i in onnx.load(path).graph.initializer}
    width = weights["input_proj.weight"].shape[0]
    depth = sum(1 for k in weights if k.endswith(".in_ln.weight"))
    student = dh.DistilledHead(weights["input_proj.weight"].shape[1],
                               weights["cond_embed.weight"].shape[1] // 2, width, depth)
    state = student.state_dict()
    missing = [k for k in state if k not in weights]
    if missing:
        raise SystemExit(f"dmd_head: {path} lacks {missing[:3]}: not a distilled head graph")
    student.load_state_dict({k: weights[k].reshape(state[k].shape) for k in state})
    return student


@torch.no_grad()
def ddim_samples(net, z, z_u, cfg, x_T, eta, steps, clip, gen=None):
    """The teacher's DDIM sampler (eta 1: the stochastic one; eta 0: the ODE), guided epsilon,
    x0 clipped where clip, on `steps` respaced steps (as diffusion.Schedule in Go)."""
    s = Diffusion.respaced(dh.TRAIN_STEPS, steps)
    x = x_T.double()
    n = x.shape[0]
    for k in reversed(range(len(s.timestep_map))):
        t = torch.full((n,), float(s.timestep_map[k]))
        eps = guided_eps(net, x.float(), t, z, z_u, cfg).double()
        x0 = s.sqrt_recip_acp[k] * x - s.sqrt_recipm1_acp[k] * eps
        if clip:
            x0 = x0.clamp(-1, 1)
        e = (s.sqrt_recip_acp[k] * x - x0) / s.sqrt_recipm1_acp[k]
        ab, ab_prev = s.acp[k], s.acp_prev[k]
        sigma = eta * math.sqrt((1 - ab_prev) / (1 - ab) * (1 - ab / ab_prev)) if k > 0 else 0.0
        x = math.sqrt(ab_prev) * x0 + math.sqrt(max(1 - ab_prev - sigma ** 2, 0.0)) * e
        if sigma > 0:
            x = x + sigma * torch.randn(x.shape, generator=gen, dtype=torch.float64)
    return x.float()


def energy_distance(a, b):
    """Mean over contexts of the energy distance between sample sets a, b [C,S,D]
    (2 E|X-Y| - E|X-X'| - E|Y-Y'|, the V-statistic)."""
    ab = torch.cdist(a, b).mean(dim=(1, 2))
    aa = torch.cdist(a, a).mean(dim=(1, 2))
    bb = torch.cdist(b, b).mean(dim=(1, 2))
    return float((2 * ab - aa - bb).mean())


class HeldOut:
    """contexts x samples rows from Fashion-MNIST test images (their own masks and w), and the
    teacher's ddim eta 1 / 25-step samples there, the reference of every energy distance."""

    def __init__(self, mar, net, clip, contexts=128, samples=48, seed=1234):
        from lib import fmnist

        gen = dh.generator(seed)
        images, labels = fmnist.load("test")
        idx = torch.randperm(len(images), generator=gen)[:contexts // 4].numpy()
        z, z_u, cfg = dh.contexts(mar, fmnist.tokenize(images[idx]), torch.from_numpy(labels[idx]),
                                  4, gen)
        self.c, self.s = z.shape[0], samples
        rep = lambda v: v.repeat_interleave(samples, dim=0)
        self.z, self.z_u, self.cfg = rep(z), rep(z_u), rep(cfg)
        self.net, self.clip, self.d = net, clip, mar.token_dim
        self.ref = self.teacher(1.0, 25, seed + 1)
        self.baselines = {"ddim_eta1_25_other_noise": self.distance(self.teacher(1.0, 25, seed + 2)),
                          "ddim_eta1_50": self.distance(self.teacher(1.0, 50, seed + 3)),
                          "ddim_eta0_25_ode": self.distance(self.teacher(0.0, 25, seed + 4))}

    def teacher(self, eta, steps, seed):
        gen = dh.generator(seed)
        x_T = torch.randn(self.z.shape[0], self.d, generator=gen)
        return ddim_samples(self.net, self.z, self.z_u, self.cfg, x_T, eta, steps, self.clip, gen)

    def distance(self, x):
        return round(energy_distance(x.reshape(self.c, self.s, -1), self.ref.reshape(self.c, self.s, -1)), 5)

    @torch.no_grad()
    def student(self, student, seed=99):
        gen = dh.generator(seed)
        out = {}
        for k in dh.STUDENT_STEPS:
            n = self.z.shape[0]
            x_T = torch.randn(n, self.d, generator=gen)
            eps = torch.randn(k, n, self.d, generator=gen)
            x = dh.sample_student(student, self.z, self.z_u, self.cfg, x_T, eps, k, self.clip)
            out[f"k{k}"] = self.distance(x)
        return out


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    mar, clip = dh.frozen_target(args)
    net = mar.diffloss.net
    student = load_onnx_student(args.init or os.path.join(args.pack, "distilled_head.onnx"))
    ema = copy.deepcopy(student)
    for p in ema.parameters():
        p.requires_grad_(False)
    real_eps = lambda x, tau, z, z_u, cfg: guided_eps(net, x, tau, z, z_u, cfg)
    fake = FakeScore(real_eps, net, mar.class_emb.weight.shape[1])
    t0 = time.time()
    held = HeldOut(mar, net, clip, args.heldout_contexts, args.heldout_samples)
    log = open(os.path.join(args.out, "train.log"), "a")

    def note(**kv):
        print(json.dumps(kv), file=log, flush=True)

    note(start=True, args=vars(args), clip_x0=clip, heldout_setup_s=round(time.time() - t0, 1),
         heldout_baselines=held.baselines, heldout_at_init=held.student(ema))
    from lib import fmnist

    images, labels = fmnist.load("train")
    tokens, labels = fmnist.tokenize(images), torch.from_numpy(labels)
    opt = torch.optim.AdamW(student.parameters(), lr=args.lr, betas=(args.beta1, 0.99), weight_decay=0.0)
    fake_opt = torch.optim.AdamW(fake.parameters(), lr=args.fake_lr, betas=(args.beta1, 0.99), weight_decay=0.0)
    start = time.time()
    warm = fake_warmup(args, student, fake, fake_opt, mar, tokens, labels, clip)
    note(fake_warmup=args.fake_warmup, fake_loss=warm, minutes=round((time.time() - start) / 60, 2))
    budget = args.minutes * 60
    step = chunks = 0
    run = {"gen": 0.0, "fake": 0.0}
    while time.time() - start < budget and (not args.max_steps or step < args.max_steps):
        idx = torch.randint(0, tokens.shape[0], (args.images,))
        with torch.no_grad():
            cz, cz_u, ccfg = dh.contexts(mar, tokens[idx], labels[idx], args.per_image)
        chunks += 1
        n = cz.shape[0]
        for _ in range(args.reuse * n // args.batch):
            if time.time() - start >= budget or (args.max_steps and step >= args.max_steps):
                break
            i = torch.randint(0, n, (args.batch,))
            z, z_u, cfg = cz[i], cz_u[i], ccfg[i]
            lr = args.lr * min(1.0, (step + 1) / args.warmup)
            for grp in opt.param_groups:
                grp["lr"] = lr
            if args.unguided_only:
                z_u, cfg = z, torch.ones_like(cfg)
            loss, loss_f = dmd_update(student, fake, opt, fake_opt, z, z_u, cfg, real_eps, clip,
                                      args.fake_updates, straight_through=not args.clip_stops_grad)
            ema_update(ema, student, step, args.ema)
            step += 1
            run["gen"] += loss
            run["fake"] += loss_f
            if step % args.log_every == 0:
                note(step=step, minutes=round((time.time() - start) / 60, 2), chunks=chunks,
                     dmd=round(run["gen"] / args.log_every, 5),
                     fake_loss=round(run["fake"] / args.log_every, 5),
                     heldout_ema=held.student(ema), heldout_raw=held.student(student))
                run = {"gen": 0.0, "fake": 0.0}
        if args.save_every and chunks % args.save_every == 0:
            save(args, ema, student, fake, step, start, None, held.baselines)
    final = held.student(ema)
    path = save(args, ema, student, fake, step, start, final, held.baselines, clip)
    note(done=True, step=step, heldout_final=final, ckpt=path)
    return path


def fake_warmup(args, student, fake, fake_opt, mar, tokens, labels, clip):
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
        x_in, t_in = chain_inputs(student, z, z_u, cfg, clip)
        with torch.no_grad():
            x0 = student(x_in, t_in, z, z_u, cfg)
            x0 = x0.clamp(-1, 1) if clip else x0
        loss = denoising_loss(fake, x0, z, z_u, cfg, t_in)
        fake_opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(fake.parameters(), 1.0)
        fake_opt.step()
        losses.append(loss.item())
    return round(sum(losses[-100:]) / max(1, len(losses[-100:])), 5)


def save(args, ema, student, fake, step, start, final, baselines, clip=True):
    """A checkpoint distill_head's export reads (student, config, args), with this method's
    record: the energy distances of the EMA student and the baselines they are read against."""
    ck = dict(student=ema.state_dict(), student_raw=student.state_dict(), fake=fake.state_dict(),
              config=ema.config(), minutes=round((time.time() - start) / 60, 1), steps=step,
              teacher_rows=0, heldout=None, args=vars(args), clip_x0=clip,
              method=method_text(args), energy=dict(student=final, baselines=baselines))
    path = os.path.join(args.out, "student-last.pth")
    torch.save(ck, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def method_text(args):
    return ("distribution matching (DMD) against the frozen head's guided score, fine-tuned from "
            f"the regression head; the student's own K-step chains as inputs; fake score "
            f"{args.fake_updates} updates per student update; contexts from fashion-mnist train, "
            f"unknown count uniform 1..49, w ~ U[1,{dh.CFG_MAX:g}] ({dh.UNGUIDED:g} unguided)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pack", default="models/target", help="the target's pack: the teacher, the "
                    "regression head to start from, and where the student goes")
    ap.add_argument("--init", help="the distilled_head.onnx to start from (default: the pack's)")
    ap.add_argument("--target-ckpt", help="the target's checkpoint (default: rebuilt from --pack)")
    ap.add_argument("--out", help="training run folder (train.log, student-last.pth)")
    ap.add_argument("--minutes", type=float, default=50)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--fake-lr", type=float, default=2e-4)
    ap.add_argument("--beta1", type=float, default=0.0, help="Adam's beta1 for both networks "
                    "(0: a two-player objective whose targets move each update)")
    ap.add_argument("--fake-updates", type=int, default=2, help="fake-score updates per student update")
    ap.add_argument("--warmup", type=int, default=100, help="student learning-rate warm-up updates")
    ap.add_argument("--fake-warmup", type=int, default=400, help="fake-score updates before the student moves")
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--images", type=int, default=64, help="context images per transformer chunk")
    ap.add_argument("--per-image", type=int, default=16)
    ap.add_argument("--reuse", type=int, default=8, help="passes over each chunk of contexts")
    ap.add_argument("--log-every", type=int, default=500)
    ap.add_argument("--save-every", type=int, default=50, help="chunks between checkpoints")
    ap.add_argument("--heldout-contexts", type=int, default=128)
    ap.add_argument("--heldout-samples", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clip-stops-grad", action="store_true")
    ap.add_argument("--unguided-only", action="store_true")
    ap.add_argument("--replace", action="store_true", help="overwrite the pack's distilled head on export")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--ckpt", help="student checkpoint to export (--export-only)")
    args = ap.parse_args()
    if args.export_only:
        if not args.ckpt:
            ap.error("--export-only needs --ckpt")
        dh.export_into_pack(args.ckpt, args.pack, args.replace)
        return
    if not args.out:
        ap.error("training needs --out")
    path = train(args)
    if args.replace:
        dh.export_into_pack(path, args.pack, True)


if __name__ == "__main__":
    main()
