"""A distilled few-step diffusion head for a frozen MAR target (issue 18, part 2).

The student f(x_t, t, z, z_uncond, w) -> x0 is a consistency function of the target head's
probability-flow ODE: from a state x_t on a teacher trajectory it predicts where the teacher's
deterministic sampler (DDIM, eta 0, 25 respaced steps, x0 clipped, guided epsilon
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

Contexts: real Fashion-MNIST training images, a random order and a number of unknown tokens
uniform in 1..49 per image (every count an AR schedule visits, not only training's 70-100%
masked), class dropped for the unconditional z (the transformer's fake latent).

Train (the target frozen; its checkpoint from scripts/ckpt_from_pack.py):
  nohup nice -n 19 /usr/bin/python3 scripts/distill_head.py --minutes 55 --threads 1 \
      --out runs/distill-head > runs/distill-head.log 2>&1 &
Export into a pack (adds distilled_head.onnx and the manifest's "distilled_head" entry):
  /usr/bin/python3 scripts/distill_head.py --export-only --ckpt runs/distill-head/student-last.pth \
      --pack models/target

Graph (opset 17, N dynamic): x_t [N,D] f32, t [N] f32 (training timestep 0..999), z [N,W] f32,
z_uncond [N,W] f32, cfg [N] f32 -> x0 [N,D] f32 (not clipped: the sampler clips as the pack's
clip_x0 says).
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn

from ema import ema_update
from frozen_target import load_target, sample_masks
from mardiff import Diffusion, cosine_betas, space_timesteps
from marmodel import FinalLayer, ResBlock, TimestepEmbedder

TRAIN_STEPS = 1000
TEACHER_STEPS = 25  # the teacher's respaced DDIM grid; the student's times lie on it
STUDENT_STEPS = (1, 2, 4)
# The student's times for each K (training timesteps on the 25-step grid): K = 4 uses all,
# K = 2 the first and the middle, K = 1 the first. abar: 2e-9, 0.15, 0.49, 0.85.
STUDENT_TIMES = {1: [999], 2: [999, 500], 4: [999, 749, 500, 250]}
CFG_MAX = 4.0
UNGUIDED = 0.3  # fraction of rows trained as CFG off (w = 1, z_uncond = z)
HELDOUT = 1024
BASE = Diffusion(cosine_betas(TRAIN_STEPS))


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
        acp = torch.from_numpy(BASE.acp).float()
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


def sample_student(student, z, z_uncond, cfg, x_T, eps, k, clip=True):
    """The K-step multistep sampler the Go side runs (mar/distilled.go): x_T [N,D], eps
    [K,N,D] (eps[i] re-noises before step i; eps[0] unused, as in Go's TokenNoise.Eps)."""
    x = x_T
    x0 = None
    for i, t in enumerate(STUDENT_TIMES[k]):
        tt = torch.full((x.shape[0],), float(t))
        if i > 0:
            x = float(BASE.sqrt_acp[t]) * x0 + float(BASE.sqrt_1m_acp[t]) * eps[i]
        x0 = student(x, tt, z, z_uncond, cfg)
        if clip:
            x0 = x0.clamp(-1, 1)
    return x0


class Teacher:
    """The frozen head's DDIM (eta 0) ODE on the 25-step grid, x0 clipped, epsilon guided and
    made consistent with the clipped x0 (as diffusion.Schedule.SampleStep does in Go)."""

    def __init__(self, net):
        self.net = net
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
            x0 = (s.sqrt_recip_acp[k] * x - s.sqrt_recipm1_acp[k] * eps).clamp(-1, 1)
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


def heldout(mar, teacher, seed=1234):
    import fmnist

    images, labels = fmnist.load("test")
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(images), generator=gen)[:HELDOUT // 4].numpy()
    return make_data(mar, teacher, fmnist.tokenize(images[idx]), torch.from_numpy(labels[idx]),
                     len(idx), 4, gen)


@torch.no_grad()
def evaluate(student, data, seed=4321):
    """Per student time, MSE of f(x_t) against the teacher's endpoint (on teacher states), and
    per K, the moments of K-step samples against the teacher's: |mean diff| and std ratio over
    the held-out rows (a distribution check: K > 1 re-noises, so no pointwise target exists)."""
    out = {}
    for t, x in data["states"].items():
        x0 = student(x, torch.full((x.shape[0],), float(t)), data["z"], data["z_u"], data["cfg"])
        out[f"mse_t{t}"] = round(float(((x0.clamp(-1, 1) - data["x0"]) ** 2).mean()), 6)
    gen = torch.Generator().manual_seed(seed)
    ref = data["x0"]
    for k in STUDENT_STEPS:
        eps = torch.randn((k,) + ref.shape, generator=gen)
        s = sample_student(student, data["z"], data["z_u"], data["cfg"], data["x_T"], eps, k)
        out[f"k{k}_mean_diff"] = round(float((s.mean(0) - ref.mean(0)).abs().mean()), 5)
        out[f"k{k}_std_ratio"] = round(float(s.std(0).mean() / ref.std(0).mean()), 4)
    return out


def train(args):
    import fmnist

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    mar, _ = load_target(args.target_ckpt)
    teacher = Teacher(mar.diffloss.net)
    width = mar.class_emb.weight.shape[1]
    student = DistilledHead(mar.token_dim, width, args.width, args.depth)
    ema = DistilledHead(mar.token_dim, width, args.width, args.depth)
    ema.load_state_dict(student.state_dict())
    for p in ema.parameters():
        p.requires_grad_(False)
    images, labels = fmnist.load("train")
    tokens, labels_t = fmnist.tokenize(images), torch.from_numpy(labels)
    held = heldout(mar, teacher)
    opt = torch.optim.AdamW(student.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    log = open(os.path.join(args.out, "train.log"), "a")

    def note(**kv):
        print(json.dumps(kv), file=log, flush=True)

    params = sum(p.numel() for p in student.parameters())
    note(start=True, args=vars(args), params=params, heldout_at_init=evaluate(ema, held))
    times = torch.tensor(STUDENT_TIMES[4])
    # t = 999 is the only input of K = 1 and the first of every K: drawn as often as the others together
    t_probs = torch.tensor([0.4, 0.2, 0.2, 0.2])
    budget = args.minutes * 60
    start = last_save = time.time()
    step, chunks, rows_seen, run_loss = 0, 0, 0, 0.0
    teacher_s = 0.0
    while time.time() - start < budget:
        t0 = time.time()
        data = make_data(mar, teacher, tokens, labels_t, args.images, args.per_image)
        teacher_s += time.time() - t0
        chunks += 1
        n = data["x0"].shape[0]
        rows_seen += n
        # each chunk is used args.reuse times over (fresh batches of it), then replaced
        for _ in range(args.reuse * n // args.batch):
            elapsed = time.time() - start
            if elapsed >= budget:
                break
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * \
                (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * elapsed / budget)))
            for g in opt.param_groups:
                g["lr"] = lr
            i = torch.randint(0, n, (args.batch,))
            which = torch.multinomial(t_probs, args.batch, replacement=True)
            x_t = torch.stack([data["states"][int(times[j])][r] for j, r in zip(which, i)])
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
                     heldout_ema=evaluate(ema, held))
                run_loss = 0.0
        if time.time() - last_save > 300:
            save(args, student, ema, step, rows_seen, start, None)
            last_save = time.time()
    final = evaluate(ema, held)
    path = save(args, student, ema, step, rows_seen, start, final)
    note(done=True, step=step, rows=rows_seen, heldout_final=final, ckpt=path)
    return path


def save(args, student, ema, step, rows, start, heldout_eval):
    ck = dict(student=ema.state_dict(), student_raw=student.state_dict(), config=ema.config(),
              minutes=round((time.time() - start) / 60, 1), steps=step, teacher_rows=rows,
              heldout=heldout_eval, args=vars(args))
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

    n, d, w = 3, student.token_dim, student.z_width
    args = (torch.randn(n, d), torch.tensor([999.0, 500.0, 250.0]), torch.randn(n, w),
            torch.randn(n, w), torch.tensor([1.0, 2.0, 3.0]))
    names = ["x_t", "t", "z", "z_uncond", "cfg"]
    with torch.no_grad():
        torch.onnx.export(student.eval(), args, path, opset_version=17, input_names=names,
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
        entry["training"] = {
            "method": f"regression onto the frozen head's DDIM eta-0 ODE endpoints "
                      f"({TEACHER_STEPS} steps, x0 clipped, guided eps), inputs the ODE states "
                      f"at the student's times; contexts from fashion-mnist train, unknown count "
                      f"uniform 1..49, w ~ U[1,{CFG_MAX:g}] ({UNGUIDED:g} unguided)",
            "width": ck["config"]["width"], "depth": ck["config"]["depth"],
            "minutes": ck["minutes"], "steps": ck["steps"], "teacher_rows": ck["teacher_rows"],
            "batch": a.get("batch"), "lr": a.get("lr"), "heldout": ck.get("heldout")}
    return entry


def export_into_pack(ck_path, pack):
    student, ck = load_student(ck_path)
    path = os.path.join(pack, "distilled_head.onnx")
    export_graph(student, path)
    manifest_path = os.path.join(pack, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
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
    ap.add_argument("--target-ckpt", default="runs/target-rebuilt/checkpoint-last.pth")
    ap.add_argument("--out", help="training run folder (train.log, student-last.pth)")
    ap.add_argument("--pack", help="pack to add the student to (after training, or --export-only)")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--ckpt", help="student checkpoint to export (--export-only)")
    args = ap.parse_args()
    if args.export_only:
        if not args.ckpt or not args.pack:
            ap.error("--export-only needs --ckpt and --pack")
        export_into_pack(args.ckpt, args.pack)
        return
    if not args.out:
        ap.error("training needs --out")
    path = train(args)
    if args.pack:
        export_into_pack(path, args.pack)


if __name__ == "__main__":
    main()
