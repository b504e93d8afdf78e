"""A distilled few-step diffusion head for a frozen MAR target, any pack.

The student f(x_t, t, z, z_uncond, w) -> x0 is a consistency function of the target head's
probability-flow ODE: from a state x_t on a teacher trajectory it predicts where the teacher's
deterministic sampler (DDIM, eta 0, 25 respaced steps, x0 clipped where the pack's clip_x0
says, guided epsilon
uncond + w (cond - uncond)) ends. Sampling in K steps (K in STUDENT_STEPS) is the consistency
models' multistep sampler: x0 = f(x_T, 999); then for each later time t_i of the K-step list,
x_{t_i} = sqrt(abar) x0 + sqrt(1 - abar) eps_i with the caller's noise eps_i, x0 = f(x_{t_i}, t_i).

Why direct regression onto teacher trajectories, not progressive or consistency distillation:
- the head is a small MLP on 16-dim tokens, so a full 25-step teacher ODE costs about as much
  as a few student updates: on this CPU the exact endpoint of every training trajectory is
  affordable, and regressing on it has no bootstrapping error (consistency distillation learns
  f from its own EMA at the neighbouring ODE step, which needs many more updates to propagate
  from t = 0 to t = 999 than an hour of one CPU thread gives);
- progressive distillation needs log2(25) ~ 5 rounds, each a training run of its own, and
  ends with a deterministic sampler for each K; here one network serves K = 1, 2 and 4,
  because every state recorded on the trajectory (at the K = 4 times) is a training input;
- K > 1 re-noises with fresh noise, so the multistep sampler is stochastic, like the ddim eta 1
  and ddpm samplers the target is measured with.
The limit: regression onto the mean endpoint is exact only where the teacher map is learnable
by this network; what the student cannot fit, it blurs (the MSE optimum is a conditional mean).

Guidance: the guidance scale w is an input (with both conditioning vectors), trained on
w ~ U[1, CFG_MAX] (a fraction of rows unguided: w = 1 and z_uncond = z, what the sampler passes
when CFG is off), so MAR's linear cfg_schedule, which changes w at every AR step, is honoured
per token with one student call instead of a conditional and an unconditional head call. A
request with a cfg above CFG_MAX is refused (outside the trained range).

Temperature: MAR's temperature multiplies the standard deviation of every reverse step; the
student's map has no such step, so the Go sampler refuses temperatures other than 1.

Contexts (--contexts): token sequences, each with a random order and a number of unknown
tokens uniform in 1..L (every count an AR schedule visits, not only training's 70-100% masked),
class dropped for the unconditional z (the transformer's fake latent). The sequences are
- data: real Fashion-MNIST training images (the embedded pack, the default there);
- self: for a pack without a dataset (the default for any other pack), sequences the frozen
  target generates itself: MAR's loop in --gen-iter AR steps, each token from the teacher's
  own ODE, one w ~ U[1, CFG_MAX] per image; a pool of --pool of them, --gen-fresh replaced
  before every teacher chunk. The student then learns the head where the target's own
  samples take it, which is where it is used; held-out rows come from a separate seed.

Quality (the manifest entry's training.quality, from evaluate on HELDOUT rows): for K = 1, 2, 4
the RMS of the student's K-step x0 against the teacher's endpoint from the same x_T.

Any pack (the teacher rebuilt from its graphs by ckpt_from_pack.rebuild; the student written
into the pack, refused where one exists unless --replace):
  /usr/bin/python3 scripts/train/distill_head.py --pack packs/mar-base --out runs/distill-mar-base \
      --minutes 60 --threads 16
Embedded target (data contexts; its committed head was made so, from a rebuilt checkpoint):
  nohup nice -n 19 /usr/bin/python3 scripts/train/distill_head.py --minutes 55 --threads 1 \
      --target-ckpt runs/target-rebuilt/checkpoint-last.pth --out runs/distill-head \
      > runs/distill-head.log 2>&1 &
  /usr/bin/python3 scripts/train/distill_head.py --export-only --ckpt runs/distill-head/student-last.pth \
      --pack models/target --replace

Graph (opset 17, N dynamic): x_t [N,D] f32, t [N] f32 (training timestep 0..999), z [N,W] f32,
z_uncond [N,W] f32, cfg [N] f32 -> x0 [N,D] f32 (not clipped: the sampler clips as the pack's
clip_x0 says).
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
from lib.marmodel import FinalLayer, ResBlock, TimestepEmbedder

TRAIN_STEPS = 1000
TEACHER_STEPS = 25  # the teacher's respaced DDIM grid; the student's times lie on it
STUDENT_STEPS = (1, 2, 4)
# The student's times for each K (training timesteps on the 25-step grid): K = 4 uses all,
# K = 2 the first and the middle, K = 1 the first. abar: 2e-9, 0.15, 0.49, 0.85.
STUDENT_TIMES = {1: [999], 2: [999, 500], 4: [999, 749, 500, 250]}
CFG_MAX = 4.0
UNGUIDED = 0.3  # fraction of rows trained as CFG off (w = 1, z_uncond = z)
HELDOUT = 1024  # held-out teacher rows (4 per context sequence); --heldout
BASE = Diffusion(cosine_betas(TRAIN_STEPS))
DEVICE = torch.device("cpu")  # --device: where tensors are made (torch.set_default_device)


def use_device(name, tf32=False):
    """Makes name (cpu, cuda, cuda:N) the device of every new tensor and generator here; tf32
    lets CUDA's matmuls and convolutions run in TF32."""
    global DEVICE
    DEVICE = torch.device(name)
    if hasattr(torch, "set_default_device"):  # torch >= 2.0
        torch.set_default_device(DEVICE)
    elif DEVICE.type != "cpu":
        raise SystemExit(f"distill_head: --device {name} needs torch >= 2.0 (this is {torch.__version__})")
    if tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def fmnist_tensors(images, labels):
    """Fashion-MNIST images [N,28,28] uint8 and labels as tokens and label tensors on DEVICE."""
    from lib import fmnist

    return fmnist.tokenize(images).to(DEVICE), torch.from_numpy(labels).to(DEVICE)


def generator(seed):
    return torch.Generator(device=DEVICE).manual_seed(seed)


class DistilledHead(nn.Module):
    """SimpleMLPAdaLN's shape (AdaLN residual MLP over the token) with the conditioning widened
    to (z, z_uncond, w) and the output parametrised as v: x0 = sqrt(abar) x_t - sqrt(1-abar) F,
    well conditioned at every t (epsilon would divide by sqrt(abar) ~ 4e-5 at t = 999)."""

    def __init__(self, token_dim, z_width, width, depth):
        super().__init__()
        self.token_dim, self.z_width, self.width, self.depth = token_dim, z_width, width, depth
        self.time_embed = TimestepEmbedder(width)
        self.cfg_embed = TimestepEmbedder(width)
        self.cond_embed = nn.Linear(2 * z_width, width)
        self.input_proj = nn.Linear(token_dim, width)
        self.res_blocks = nn.ModuleList([ResBlock(width) for _ in range(depth)])
        self.final_layer = FinalLayer(width, token_dim)
        for b in self.res_blocks:  # MAR's zero init of the modulations and the output
            nn.init.zeros_(b.adaLN_modulation[-1].weight)
            nn.init.zeros_(b.adaLN_modulation[-1].bias)
        for lin in [self.final_layer.adaLN_modulation[-1], self.final_layer.linear]:
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)
        acp = torch.from_numpy(BASE.acp).float().to(DEVICE)  # from_numpy ignores the default device
        self.register_buffer("sqrt_acp", acp.sqrt())
        self.register_buffer("sqrt_1m_acp", (1 - acp).sqrt())

    def forward(self, x_t, t, z, z_uncond, cfg):
        # w enters through the timestep embedding's frequencies: (w - 1) * 100 spreads the
        # trained range [1, 4] over 0..300, like timesteps
        y = self.time_embed(t) + self.cfg_embed((cfg - 1) * 100) + \
            self.cond_embed(torch.cat([z, z_uncond], dim=1))
        h = self.input_proj(x_t)
        for b in self.res_blocks:
            h = b(h, y)
        f = self.final_layer(h, y)
        ti = t.long()
        return self.sqrt_acp[ti][:, None] * x_t - self.sqrt_1m_acp[ti][:, None] * f

    def config(self):
        return dict(token_dim=self.token_dim, z_width=self.z_width, width=self.width,
                    depth=self.depth)


def sample_student(student, z, z_uncond, cfg, x_T, eps, k, clip=True, times=None):
    """The K-step multistep sampler the Go side runs (mar/distilled.go): x_T [N,D], eps
    [K,N,D] (eps[i] re-noises before step i; eps[0] unused, as in Go's TokenNoise.Eps), on the
    K-step chain's training timesteps or on `times` (K decreasing timesteps)."""
    x = x_T
    x0 = None
    for i, t in enumerate(times or STUDENT_TIMES[k]):
        tt = torch.full((x.shape[0],), float(t))
        if i > 0:
            x = float(BASE.sqrt_acp[t]) * x0 + float(BASE.sqrt_1m_acp[t]) * eps[i]
        x0 = student(x, tt, z, z_uncond, cfg)
        if clip:
            x0 = x0.clamp(-1, 1)
    return x0


class Teacher:
    """The frozen head's DDIM (eta 0) ODE on the 25-step grid, epsilon guided; x0 clipped to
    [-1, 1] where the pack's clip_x0 says (pixel tokens; not VAE latents) and epsilon made
    consistent with the clipped x0 (as diffusion.Schedule.SampleStep does in Go)."""

    def __init__(self, net, clip=True):
        self.net, self.clip = net, clip
        self.sched = Diffusion.respaced(TRAIN_STEPS, TEACHER_STEPS)
        self.keep = self.sched.timestep_map
        for times in STUDENT_TIMES.values():
            for t in times:
                if t not in self.keep:
                    raise ValueError(f"student time {t} is not on the teacher's grid {self.keep}")

    @torch.no_grad()
    def run(self, z, z_uncond, cfg, x_T):
        """Returns the states at the student's times {t: x_t} and the endpoint x0 (float32)."""
        s = self.sched
        x = x_T.double()
        n, d = x.shape
        guided = cfg != 1
        states = {}
        for k in reversed(range(len(self.keep))):
            t = self.keep[k]
            if t in STUDENT_TIMES[4]:
                states[t] = x.float()
            tt = torch.full((n,), float(t))
            eps = self.net(x.float(), tt, z)[:, :d].double()
            if guided.any():
                eps_u = self.net(x.float(), tt, z_uncond)[:, :d].double()
                w = cfg.double()[:, None]
                eps = torch.where(guided[:, None], eps_u + w * (eps - eps_u), eps)
            x0 = s.sqrt_recip_acp[k] * x - s.sqrt_recipm1_acp[k] * eps
            if self.clip:
                x0 = x0.clamp(-1, 1)
            e = (s.sqrt_recip_acp[k] * x - x0) / s.sqrt_recipm1_acp[k]
            ab_prev = s.acp_prev[k]
            x = math.sqrt(ab_prev) * x0 + math.sqrt(1 - ab_prev) * e
        return states, x.float()


@torch.no_grad()
def contexts(mar, tokens, labels, per_image, gen=None):
    """Conditioning vectors of up to per_image unknown positions per image: z (class), z_u
    (class dropped), and each row's guidance scale w (UNGUIDED of them w = 1 with z_u = z)."""
    b, L, _ = tokens.shape
    mask = sample_masks(b, L, gen)
    z = mar.forward_keep(tokens, mask, labels, torch.zeros(b))
    z_u = mar.forward_keep(tokens, mask, labels, torch.ones(b))
    # a random subset of each row's unknown positions, so one transformer call feeds many
    score = torch.rand(b, L, generator=gen) + (1 - mask) * 2  # known positions sort last
    pick = torch.argsort(score, dim=1)[:, :per_image]
    valid = torch.gather(mask, 1, pick) > 0.5
    rows = torch.arange(b)[:, None].expand_as(pick)
    z, z_u = z[rows[valid], pick[valid]], z_u[rows[valid], pick[valid]]
    n = z.shape[0]
    cfg = 1 + (CFG_MAX - 1) * torch.rand(n, generator=gen)
    off = torch.rand(n, generator=gen) < UNGUIDED
    cfg[off] = 1.0
    z_u = torch.where(off[:, None], z, z_u)
    return z, z_u, cfg


def make_data(mar, teacher, tokens, labels, images, per_image, gen=None):
    """One chunk of teacher trajectories: inputs at the student's times and their endpoints."""
    idx = torch.randint(0, tokens.shape[0], (images,), generator=gen)
    z, z_u, cfg = contexts(mar, tokens[idx], labels[idx], per_image, gen)
    x_T = torch.randn(z.shape[0], tokens.shape[2], generator=gen)
    states, x0 = teacher.run(z, z_u, cfg, x_T)
    return dict(z=z, z_u=z_u, cfg=cfg, states=states, x0=x0, x_T=x_T)


@torch.no_grad()
def self_generate(mar, teacher, n, num_iter, gen=None, batch=64):
    """n token sequences [n, L, D] and their classes sampled by the frozen target itself (self
    contexts, for packs that come without a dataset): MAR's loop in num_iter AR steps (random
    order, cosine mask schedule), each step's tokens from the teacher's ODE with a fresh x_T,
    one guidance scale per image w ~ U[1, CFG_MAX] (UNGUIDED of them w = 1)."""
    L, D = mar.seq_len, mar.token_dim
    classes = mar.class_emb.weight.shape[0]
    out_tokens, out_labels = [], []
    for lo in range(0, n, batch):
        b = min(batch, n - lo)
        labels = torch.randint(0, classes, (b,), generator=gen)
        cfg = 1 + (CFG_MAX - 1) * torch.rand(b, generator=gen)
        cfg[torch.rand(b, generator=gen) < UNGUIDED] = 1.0
        order = torch.argsort(torch.rand(b, L, generator=gen), dim=1)
        tokens, mask = torch.zeros(b, L, D), torch.ones(b, L)
        known = 0
        for step in range(num_iter):
            # MAR's schedule: after this step cos(pi/2 (step+1)/num_iter) of the sequence stays
            # masked, at least one token fewer than before and all known after the last step
            left = int(math.floor(L * math.cos(math.pi / 2 * (step + 1) / num_iter)))
            left = 0 if step == num_iter - 1 else max(1, min(L - known - 1, left))
            new = order[:, known:L - left]
            z = mar.forward_keep(tokens, mask, labels, torch.zeros(b))
            z_u = mar.forward_keep(tokens, mask, labels, torch.ones(b))
            rows = torch.arange(b)[:, None].expand_as(new)
            m = new.shape[1]
            w = cfg[:, None].expand(b, m).reshape(-1)
            _, x0 = teacher.run(z[rows, new].reshape(b * m, -1), z_u[rows, new].reshape(b * m, -1),
                                w, torch.randn(b * m, D, generator=gen))
            tokens[rows, new] = x0.reshape(b, m, D)
            mask[rows, new] = 0.0
            known = L - left
        out_tokens.append(tokens)
        out_labels.append(labels)
    return torch.cat(out_tokens), torch.cat(out_labels)


def heldout(mar, teacher, contexts_kind, num_iter, rows=HELDOUT, seed=1234):
    """About rows teacher rows (4 per sequence) on contexts training never sees: Fashion-MNIST
    test images (data), or sequences the target generates from a seed training does not use
    (self; training's pool is drawn from the global generator, seeded by --seed)."""
    gen = generator(seed)
    if contexts_kind == "self":
        tokens, labels = self_generate(mar, teacher, rows // 4, num_iter, gen)
        return make_data(mar, teacher, tokens, labels, rows // 4, 4, gen)
    from lib import fmnist

    images, labels = fmnist.load("test")
    idx = torch.randperm(len(images), generator=gen)[:rows // 4].cpu().numpy()
    return make_data(mar, teacher, *fmnist_tensors(images[idx], labels[idx]), len(idx), 4, gen)


def teacher_noise(data, k):
    """eps [K,N,D] for sample_student that puts a perfect student back on the teacher's
    trajectory: at each later time t_i, the noise with sqrt(abar) x0_teacher + sqrt(1-abar) eps
    equal to the teacher's ODE state x_{t_i} (eps[0] unused)."""
    ref = data["x0"]
    eps = torch.zeros((k,) + ref.shape)
    for i, t in enumerate(STUDENT_TIMES[k][1:], start=1):
        eps[i] = (data["states"][t] - float(BASE.sqrt_acp[t]) * ref) / float(BASE.sqrt_1m_acp[t])
    return eps


@torch.no_grad()
def evaluate(student, data, clip=True, seed=4321):
    """The student against the teacher on held-out rows:
    - mse_t{t}: f(x_t) against the teacher's endpoint, on the teacher's state at each time;
    - rms_k{K}: RMS of the K-step sampler's x0 against the teacher's endpoint from the same x_T,
      re-noised with teacher_noise (K = 1 is the one-call map; K > 1 adds the compounding of
      its own errors), beside endpoint_rms (the endpoints' RMS, the scale to read them on);
    - k{K}_mean_diff, k{K}_std_ratio: moments of K-step samples with fresh noise against the
      teacher's endpoints (a distribution check: with fresh noise no pointwise target exists)."""
    out = {}
    ref = data["x0"]
    for t, x in data["states"].items():
        x0 = student(x, torch.full((x.shape[0],), float(t)), data["z"], data["z_u"], data["cfg"])
        x0 = x0.clamp(-1, 1) if clip else x0
        out[f"mse_t{t}"] = round(float(((x0 - ref) ** 2).mean()), 6)
    out["endpoint_rms"] = round(float(ref.pow(2).mean().sqrt()), 5)
    for k in STUDENT_STEPS:
        s = sample_student(student, data["z"], data["z_u"], data["cfg"], data["x_T"],
                           teacher_noise(data, k), k, clip)
        out[f"rms_k{k}"] = round(float((s - ref).pow(2).mean().sqrt()), 5)
    gen = generator(seed)
    for k in STUDENT_STEPS:
        eps = torch.randn((k,) + ref.shape, generator=gen)
        s = sample_student(student, data["z"], data["z_u"], data["cfg"], data["x_T"], eps, k, clip)
        out[f"k{k}_mean_diff"] = round(float((s.mean(0) - ref.mean(0)).abs().mean()), 5)
        out[f"k{k}_std_ratio"] = round(float(s.std(0).mean() / ref.std(0).mean()), 4)
    out["rows"] = int(ref.shape[0])
    return out


def read_manifest(pack):
    with open(os.path.join(pack, "manifest.json")) as f:
        return json.load(f)


def is_embedded(manifest):
    """The embedded target (models/target) was trained here on Fashion-MNIST: its contexts can be
    the data's; any other pack brings no dataset."""
    return str(manifest.get("training", {}).get("dataset", "")).startswith("fashion-mnist")


def frozen_target(args):
    """The target (--target-ckpt, else rebuilt from --pack's graphs) with every parameter frozen,
    and whether its head's x0 is clipped (the pack's clip_x0; the embedded checkpoint's is)."""
    if args.target_ckpt:
        mar, _ = load_target(args.target_ckpt)
    else:
        from packs.ckpt_from_pack import rebuild

        mar, _ = rebuild(args.pack)
        for p in mar.parameters():
            p.requires_grad_(False)
    clip = read_manifest(args.pack)["diffusion"]["clip_x0"] if args.pack else True
    return mar.to(DEVICE), clip


class ContextPool:
    """Token sequences and classes to draw contexts from: Fashion-MNIST train (data), or a pool
    of args.pool sequences the target generates itself in args.gen_iter AR steps (self), of
    which args.gen_fresh per teacher chunk are replaced by new ones, generated args.gen_batch
    at a time (a GPU's pass costs about the same at batch 8 as at 64: docs/models.md)."""

    def __init__(self, args, mar, teacher):
        self.kind, self.mar, self.teacher = args.contexts, mar, teacher
        self.num_iter, self.fresh = args.gen_iter, args.gen_fresh
        self.batch = max(1, min(args.gen_batch, args.pool))
        self.generated_s, self.generated, self.owed = 0.0, 0, 0
        if self.kind == "data":
            from lib import fmnist

            images, labels = fmnist.load("train")
            self.tokens, self.labels = fmnist_tensors(images, labels)
            return
        self.tokens, self.labels = self._generate(args.pool)
        self.next = 0

    def _generate(self, n):
        t0 = time.time()
        out = self_generate(self.mar, self.teacher, n, self.num_iter, batch=self.batch)
        self.generated_s += time.time() - t0
        self.generated += n
        return out

    def refresh(self):
        if self.kind == "data" or self.fresh <= 0:
            return
        self.owed += self.fresh
        if self.owed < self.batch:
            return
        n, self.owed = min(self.owed, self.tokens.shape[0]), 0
        tokens, labels = self._generate(n)
        idx = (self.next + torch.arange(n)) % self.tokens.shape[0]
        self.tokens[idx], self.labels[idx] = tokens, labels
        self.next = int(idx[-1]) + 1


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    mar, clip = frozen_target(args)
    teacher = Teacher(mar.diffloss.net, clip)
    width = mar.class_emb.weight.shape[1]
    student = DistilledHead(mar.token_dim, width, args.width, args.depth).to(DEVICE)
    ema = DistilledHead(mar.token_dim, width, args.width, args.depth).to(DEVICE)
    ema.load_state_dict(student.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    t0 = time.time()
    held = heldout(mar, teacher, args.contexts, args.gen_iter, args.heldout)
    pool = ContextPool(args, mar, teacher)
    setup_s = time.time() - t0
    opt = torch.optim.AdamW(student.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    log = open(os.path.join(args.out, "train.log"), "a")

    def note(**kv):
        print(json.dumps(kv), file=log, flush=True)

    params = sum(p.numel() for p in student.parameters())
    note(start=True, args=vars(args), params=params, clip_x0=clip, setup_s=round(setup_s, 1),
         heldout_at_init=evaluate(ema, held, clip))
    times = torch.tensor(STUDENT_TIMES[4])
    # t = 999 is the only input of K = 1 and the first of every K: drawn as often as the others together
    t_probs = torch.tensor([0.4, 0.2, 0.2, 0.2])
    budget = args.minutes * 60
    start = last_save = time.time()
    step, chunks, rows_seen, run_loss = 0, 0, 0, 0.0
    teacher_s = 0.0
    while time.time() - start < budget and (not args.max_steps or step < args.max_steps):
        t0 = time.time()
        pool.refresh()
        data = make_data(mar, teacher, pool.tokens, pool.labels, args.images, args.per_image)
        teacher_s += time.time() - t0
        chunks += 1
        n = data["x0"].shape[0]
        states = torch.stack([data["states"][int(t)] for t in times])  # [4, n, D], times' order
        rows_seen += n
        # each chunk is used args.reuse times over (fresh batches of it), then replaced
        for _ in range(args.reuse * n // args.batch):
            elapsed = time.time() - start
            if elapsed >= budget or (args.max_steps and step >= args.max_steps):
                break
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * \
                (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * elapsed / budget)))
            for g in opt.param_groups:
                g["lr"] = lr
            i = torch.randint(0, n, (args.batch,))
            which = torch.multinomial(t_probs, args.batch, replacement=True)
            x_t = states[which, i]
            pred = student(x_t, times[which].float(), data["z"][i], data["z_u"][i], data["cfg"][i])
            loss = ((pred - data["x0"][i]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            opt.step()
            ema_update(ema, student, step, args.ema)
            step += 1
            run_loss += loss.item()
            if step % args.log_every == 0:
                note(step=step, minutes=round((time.time() - start) / 60, 2), lr=lr,
                     loss=round(run_loss / args.log_every, 6), chunks=chunks, rows=rows_seen,
                     teacher_share=round(teacher_s / (time.time() - start), 3),
                     heldout_ema=evaluate(ema, held, clip))
                run_loss = 0.0
        if time.time() - last_save > 300:
            save(args, student, ema, step, rows_seen, start, None)
            last_save = time.time()
    final = evaluate(ema, held, clip)
    cost = dict(teacher_s=round(teacher_s, 1), generated=pool.generated,
                generate_s=round(pool.generated_s, 1), setup_s=round(setup_s, 1))
    path = save(args, student, ema, step, rows_seen, start, final, clip, cost)
    note(done=True, step=step, rows=rows_seen, heldout_final=final, ckpt=path)
    return path


def save(args, student, ema, step, rows, start, heldout_eval, clip=True, cost=None):
    ck = dict(student=ema.state_dict(), student_raw=student.state_dict(), config=ema.config(),
              minutes=round((time.time() - start) / 60, 1), steps=step, teacher_rows=rows,
              heldout=heldout_eval, args=vars(args), clip_x0=clip, cost=cost)
    path = os.path.join(args.out, "student-last.pth")
    torch.save(ck, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def load_student(path):
    ck = torch.load(path, map_location="cpu")
    s = DistilledHead(**ck["config"])
    s.load_state_dict(ck["student"])
    return s.eval(), ck


def export_graph(student, path):
    """Writes the student as ONNX (N dynamic) with the inputs the Go sampler feeds."""
    import onnx
    from lib.graphs import onnx_export

    n, d, w = 3, student.token_dim, student.z_width
    args = (torch.randn(n, d), torch.tensor([999.0, 500.0, 250.0]), torch.randn(n, w),
            torch.randn(n, w), torch.tensor([1.0, 2.0, 3.0]))
    names = ["x_t", "t", "z", "z_uncond", "cfg"]
    with torch.no_grad():
        onnx_export(student.eval(), args, path, opset_version=17, input_names=names,
                          output_names=["x0"], dynamic_axes={k: {0: "N"} for k in names + ["x0"]})
    model = onnx.load(path)
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = d
    onnx.checker.check_model(model)
    onnx.save(model, path)


def manifest_entry(file, ck):
    """The manifest's distilled_head entry (docs/model-pack.md)."""
    times = {str(k): v for k, v in STUDENT_TIMES.items()}
    entry = {"file": file, "format": "marspec-distilled-head/1", "steps": list(STUDENT_STEPS),
             "times": times, "cfg_max": CFG_MAX, "predicts": "x0"}
    if ck is not None:
        a = ck.get("args") or {}
        if a.get("contexts", "data") == "data":
            source = "contexts from fashion-mnist train, unknown count uniform 1..49"
        else:
            source = (f"self contexts: sequences the target generates itself ({a['gen_iter']} AR "
                      f"steps, this teacher's ODE per token, one w per sequence), a random "
                      f"order and unknown count uniform 1..L over each")
        clip = "x0 clipped" if ck.get("clip_x0", True) else "x0 not clipped (the pack's clip_x0)"
        method = ck.get("method") or (  # a checkpoint of another objective names its own
            f"regression onto the frozen head's DDIM eta-0 ODE endpoints "
            f"({TEACHER_STEPS} steps, {clip}, guided eps), inputs the ODE states "
            f"at the student's times; {source}, w ~ U[1,{CFG_MAX:g}] ({UNGUIDED:g} unguided)")
        entry["training"] = {
            "method": method,
            "width": ck["config"]["width"], "depth": ck["config"]["depth"],
            "minutes": ck["minutes"], "steps": ck["steps"], "teacher_rows": ck["teacher_rows"],
            "batch": a.get("batch"), "lr": a.get("lr"), "heldout": ck.get("heldout")}
        # a fine-tuning run (energy_head, dmd_head) has no teacher rows, batch or per-t record
        entry["training"] = {k: v for k, v in entry["training"].items() if v not in (None, 0)}
        held = ck.get("heldout") or {}
        if "rms_k1" in held:
            entry["training"]["quality"] = {
                "rms_vs_teacher": {str(k): held[f"rms_k{k}"] for k in STUDENT_STEPS},
                "teacher_endpoint_rms": held["endpoint_rms"], "heldout_rows": held["rows"],
                "about": "RMS over held-out contexts of the K-step x0 against the teacher's "
                         "ODE endpoint from the same x_T, re-noised onto the teacher's "
                         "trajectory (distill_head.evaluate)"}
        if ck.get("energy"):
            temp, scale = a.get("teacher_temperature", 1.0), a.get("noise_scale", 1.0)
            at = f" at temperature {temp:g}" if temp != 1 else ""
            scaled = f"; the head's input noise and re-noising times {scale:g}" if scale != 1 else ""
            entry["training"]["quality"] = {
                "energy_distance": ck["energy"], "about":
                "mean over held-out contexts (fashion-mnist test) of the energy distance of each "
                f"sampler's samples to the teacher's ddim eta 1 in 25 steps{at} (lib/headchain.HeldOut); "
                f"baselines: that sampler with other noise (the floor), 50 steps, the ODE{scaled}"}
        if ck.get("cost"):
            entry["training"]["cost"] = ck["cost"]
    return entry


def export_into_pack(ck_path, pack, replace=False):
    """Writes the student's graph and manifest entry into pack; an existing head stays unless
    replace (the embedded pack's committed head is never retrained here)."""
    student, ck = load_student(ck_path)
    path = os.path.join(pack, "distilled_head.onnx")
    manifest_path = os.path.join(pack, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if not replace and ("distilled_head" in manifest or os.path.exists(path)):
        raise SystemExit(f"distill_head: {pack} already has a distilled head (--replace overwrites it)")
    if student.token_dim != manifest["token_dim"] or student.z_width != manifest["width"]:
        raise SystemExit(f"distill_head: the student ({student.token_dim}-dim tokens, z width "
                         f"{student.z_width}) does not fit {pack} ({manifest['token_dim']}, {manifest['width']})")
    export_graph(student, path)
    manifest["distilled_head"] = manifest_entry(os.path.basename(path), ck)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(json.dumps(dict(pack=pack, bytes=os.path.getsize(path),
                          distilled_head=manifest["distilled_head"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=55)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (training; export runs on the CPU)")
    ap.add_argument("--tf32", action="store_true", help="cuda: matmuls and convolutions in TF32 "
                    "(2.2x to 2.6x the fp32 chunk and self-generation speed at MAR-B on an H200)")
    ap.add_argument("--width", type=int, default=160, help="student MLP width")
    ap.add_argument("--depth", type=int, default=3, help="student residual blocks")
    ap.add_argument("--images", type=int, default=64, help="context images per teacher chunk")
    ap.add_argument("--per-image", type=int, default=16, help="unknown positions used per image")
    ap.add_argument("--reuse", type=int, default=4, help="passes over each teacher chunk")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--log-every", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many updates (0: --minutes only)")
    ap.add_argument("--target-ckpt", help="the target's PyTorch checkpoint (default: rebuilt from --pack's graphs)")
    ap.add_argument("--out", help="training run folder (train.log, student-last.pth)")
    ap.add_argument("--pack", help="the target's pack: its teacher (unless --target-ckpt) and clip_x0, "
                                   "and where the student goes (after training, or --export-only)")
    ap.add_argument("--contexts", choices=["data", "self"],
                    help="data: Fashion-MNIST train images; self: sequences the target generates "
                         "(default: data for the embedded pack, self for any other)")
    ap.add_argument("--pool", type=int, default=256, help="self: generated sequences held")
    ap.add_argument("--gen-iter", type=int, default=16, help="self: AR steps per generated sequence")
    ap.add_argument("--gen-fresh", type=int, default=8, help="self: sequences regenerated per teacher chunk (on average)")
    ap.add_argument("--gen-batch", type=int, default=64, help="self: sequences generated at once")
    ap.add_argument("--heldout", type=int, default=HELDOUT, help="held-out teacher rows for the quality numbers")
    ap.add_argument("--replace", action="store_true", help="overwrite the pack's existing distilled head")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--ckpt", help="student checkpoint to export (--export-only)")
    args = ap.parse_args()
    if args.export_only:
        if not args.ckpt or not args.pack:
            ap.error("--export-only needs --ckpt and --pack")
        export_into_pack(args.ckpt, args.pack, args.replace)
        return
    if not args.out:
        ap.error("training needs --out")
    if not args.pack and not args.target_ckpt:
        ap.error("training needs --pack (or --target-ckpt)")
    if args.pack:
        manifest = read_manifest(args.pack)
        if not args.replace and "distilled_head" in manifest:
            ap.error(f"{args.pack} already has a distilled head (--replace overwrites it)")
        if args.contexts is None:
            args.contexts = "data" if is_embedded(manifest) else "self"
    args.contexts = args.contexts or "data"
    use_device(args.device, args.tf32)
    path = train(args)
    use_device("cpu")
    if args.pack:
        export_into_pack(path, args.pack, args.replace)


if __name__ == "__main__":
    main()
