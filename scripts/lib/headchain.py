"""What the heads fine-tuned toward the stochastic sampler share (scripts/train/energy_head.py,
the pack's method, and scripts/train/dmd_head.py, tried first): the start (the regression head
read back from its graph), the student's own K-step chains as training inputs, the teacher's
DDIM samplers, and the held-out check, the energy distance per context to ddim eta 1.
"""
import argparse
import copy
import json
import math
import os
import time

import torch

from lib.mardiff import Diffusion
from train import distill_head as dh

TIMES = dh.STUDENT_TIMES[4]  # 999, 749, 500, 250: every step of every K-step chain
STAGE_PROBS = [0.4, 0.2, 0.2, 0.2]  # t = 999 is K = 1's only step and the first of every K


def guided_eps(net, x, t, z, z_uncond, cfg):
    """The teacher's guided epsilon eps_u + w (eps_c - eps_u) (rows with w = 1 pass z_uncond = z)."""
    d = x.shape[1]
    e = net(x, t, z)[:, :d]
    eu = net(x, t, z_uncond)[:, :d]
    return eu + cfg[:, None] * (e - eu)


@torch.no_grad()
def chain_states(student, z, z_u, cfg, clip, k2_share=0.5, gen=None, noise_scale=1.0):
    """The student's own chain states at every step time, [4,N,D] in TIMES' order: x_T, then
    each later state re-noised from the step before with fresh noise (K = 4's chain; the state
    at t = 500 comes from K = 2's chain, straight after t = 999, with probability k2_share).
    Training a step on these (DMD2's backward simulation) trains it on the inputs it meets.
    noise_scale multiplies x_T and the re-noising, as the sampler's temperature does."""
    n, d = z.shape[0], student.token_dim
    base = dh.BASE

    def step(x, t):
        x0 = student(x, torch.full((n,), float(t)), z, z_u, cfg)
        return x0.clamp(-1, 1) if clip else x0

    def renoise(x0, t):
        return float(base.sqrt_acp[t]) * x0 + noise_scale * float(base.sqrt_1m_acp[t]) * torch.randn(n, d, generator=gen)

    x999 = noise_scale * torch.randn(n, d, generator=gen)
    a0 = step(x999, 999)
    x749 = renoise(a0, 749)
    x500_k4 = renoise(step(x749, 749), 500)
    x250 = renoise(step(x500_k4, 500), 250)
    k2 = torch.rand(n, generator=gen) < k2_share
    x500 = torch.where(k2[:, None], renoise(a0, 500), x500_k4)
    return torch.stack([x999, x749, x500, x250])


def chain_inputs(student, z, z_u, cfg, clip, stage_probs=STAGE_PROBS, k2_share=0.5, gen=None, group=1,
                 noise_scale=1.0):
    """Each row's training input and time: a chain step drawn with stage_probs (one draw per
    `group` consecutive rows, so a context's replicas share their step) and the row's chain
    state there (chain_states)."""
    n = z.shape[0]
    stage = torch.multinomial(torch.tensor(stage_probs), n // group, replacement=True, generator=gen)
    stage = stage.repeat_interleave(group)
    states = chain_states(student, z, z_u, cfg, clip, k2_share, gen, noise_scale)
    return states[stage, torch.arange(n)], torch.tensor(TIMES, dtype=torch.float32)[stage]


def clip_output(raw, clip, straight_through=True):
    """The student's output as the sampler uses it: clipped to [-1, 1] where clip, the gradient
    passed through the clip (straight_through) or the clip's own (zero past the bounds)."""
    if not clip:
        return raw
    if straight_through:
        return raw + (raw.clamp(-1, 1) - raw).detach()
    return raw.clamp(-1, 1)


def bound_penalty(raw):
    """What passes the clip must stay at the bound: a component once pushed past it gets no say
    in the clipped sample (the gradient stops) or a say at any depth (straight through), and
    either way stays out, a ratchet that had 46% of the components at the bounds after 300
    updates here (the teacher's ddim eta 1: 21%). Half the squared distance past the bounds."""
    return 0.5 * ((raw - raw.clamp(-1, 1)) ** 2).sum(dim=1).mean()


def with_bound_penalty(loss, raw, clip, box_weight):
    """loss plus box_weight times bound_penalty(raw) where the output is clipped."""
    if clip and box_weight:
        return loss + box_weight * bound_penalty(raw)
    return loss


def optimizer_step(opt, params, loss):
    """One step of opt on loss, the gradient norm clipped to 1; returns the loss's value."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss.item()


def at_bounds(x):
    """The share of components at the clip bounds."""
    return round(float((x.abs() > 0.999).float().mean()), 4)


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
        raise SystemExit(f"headchain: {path} lacks {missing[:3]}: not a distilled head graph")
    student.load_state_dict({k: weights[k].reshape(state[k].shape) for k in state})
    return student


def deepened(student, blocks):
    """student with `blocks` residual blocks added before its final layer, their modulations
    zero as MAR initialises them: a zero gate makes a block the identity, so the deeper student
    computes what the shallower one did until training moves the gates."""
    if blocks <= 0:
        return student
    c = student.config()
    deeper = dh.DistilledHead(c["token_dim"], c["z_width"], c["width"], c["depth"] + blocks)
    missing, unexpected = deeper.load_state_dict(student.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("res_blocks.") for k in missing), (missing, unexpected)
    return deeper


@torch.no_grad()
def ddim_samples(net, z, z_u, cfg, x_T, eta, steps, clip, gen=None, temperature=1.0):
    """The teacher's DDIM sampler (eta 1: the stochastic one; eta 0: the ODE), guided epsilon,
    x0 clipped where clip, on `steps` respaced steps, the injected noise's standard deviation
    times temperature (as diffusion.Schedule.SampleStep in Go: x_T and the direction term keep
    their scale)."""
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
            x = x + temperature * sigma * torch.randn(x.shape, generator=gen, dtype=torch.float64)
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
    teacher's ddim eta 1 / 25-step samples there at the given temperature, the reference of
    every energy distance (the baselines' stochastic samplers run at that temperature too); the
    student is sampled with its input noise times noise_scale unless told otherwise."""

    def __init__(self, mar, net, clip, contexts=128, samples=48, seed=1234, temperature=1.0, noise_scale=1.0):
        from lib import fmnist

        gen = dh.generator(seed)
        images, labels = fmnist.load("test")
        idx = torch.randperm(len(images), generator=gen)[:contexts // 4].cpu().numpy()
        z, z_u, cfg = dh.contexts(mar, *dh.fmnist_tensors(images[idx], labels[idx]), 4, gen)
        self.c, self.s = z.shape[0], samples
        rep = lambda v: v.repeat_interleave(samples, dim=0)
        self.z, self.z_u, self.cfg = rep(z), rep(z_u), rep(cfg)
        self.net, self.clip, self.d, self.temperature = net, clip, mar.token_dim, temperature
        self.noise_scale = noise_scale
        self.ref = self.teacher(1.0, 25, seed + 1)
        other, ode = self.teacher(1.0, 25, seed + 2), self.teacher(0.0, 25, seed + 4)
        self.baselines = {"ddim_eta1_25_other_noise": self.distance(other),
                          "ddim_eta1_50": self.distance(self.teacher(1.0, 50, seed + 3)),
                          "ddim_eta0_25_ode": self.distance(ode),
                          "ddim_eta1_25_other_noise_unguided": self.distance(other, unguided=True),
                          "ddim_eta1_25_at_bounds": at_bounds(self.ref),
                          "ddim_eta0_25_ode_unguided": self.distance(ode, unguided=True)}

    def teacher(self, eta, steps, seed):
        gen = dh.generator(seed)
        x_T = torch.randn(self.z.shape[0], self.d, generator=gen)
        return ddim_samples(self.net, self.z, self.z_u, self.cfg, x_T, eta, steps, self.clip, gen,
                            self.temperature)

    def distance(self, x, unguided=False):
        """The mean energy distance to the reference over all contexts (or the unguided ones)."""
        keep = torch.ones(self.c, dtype=torch.bool)
        if unguided:
            keep = self.cfg.reshape(self.c, self.s)[:, 0] == 1
        a, b = x.reshape(self.c, self.s, -1)[keep], self.ref.reshape(self.c, self.s, -1)[keep]
        return round(energy_distance(a, b), 5)

    @torch.no_grad()
    def chain(self, student, times, noise_scale, gen):
        """The student's samples on the chain `times` (decreasing training timesteps) at every
        row, its input noise and re-noising drawn from gen and multiplied by noise_scale, as the
        Go sampler's temperature does (mar/denoise_distilled.go)."""
        n, k = self.z.shape[0], len(times)
        x_T = noise_scale * torch.randn(n, self.d, generator=gen)
        eps = noise_scale * torch.randn(k, n, self.d, generator=gen)
        return dh.sample_student(student, self.z, self.z_u, self.cfg, x_T, eps, k, self.clip, times=times)

    @torch.no_grad()
    def student(self, student, seed=99, noise_scale=None):
        """The student's K-step samples' distances, its noise scaled by noise_scale (default
        the check's)."""
        noise_scale = self.noise_scale if noise_scale is None else noise_scale
        gen = dh.generator(seed)
        out = {}
        for k in dh.STUDENT_STEPS:
            x = self.chain(student, dh.STUDENT_TIMES[k], noise_scale, gen)
            out[f"k{k}"] = self.distance(x)
            out[f"k{k}_unguided"] = self.distance(x, unguided=True)
            if self.clip:
                out[f"k{k}_at_bounds"] = at_bounds(x)
        return out


class Run:
    """What a fine-tuning run starts with: the frozen target (rebuilt from --pack unless
    --target-ckpt) and whether it clips x0, the student read back from the pack's head (or
    --init) and its EMA copy, the held-out check, the Fashion-MNIST train tokens the contexts
    come from, and the run's log (JSON lines in OUT/train.log, the first with the check at the
    start)."""

    def __init__(self, args):
        torch.set_num_threads(args.threads)
        dh.use_device(args.device, args.tf32)
        torch.manual_seed(args.seed)
        os.makedirs(args.out, exist_ok=True)
        self.args = args
        self.mar, self.clip = dh.frozen_target(args)
        self.net = self.mar.diffloss.net
        self.student = deepened(load_onnx_student(args.init or os.path.join(args.pack, "distilled_head.onnx")),
                                args.add_blocks)
        self.ema = copy.deepcopy(self.student)
        for p in self.ema.parameters():
            p.requires_grad_(False)
        t0 = time.time()
        self.held = HeldOut(self.mar, self.net, self.clip, args.heldout_contexts, args.heldout_samples,
                            temperature=args.teacher_temperature, noise_scale=args.noise_scale)
        self.log = open(os.path.join(args.out, "train.log"), "a")
        self.note(start=True, args=vars(args), clip_x0=self.clip, heldout_setup_s=round(time.time() - t0, 1),
                  heldout_baselines=self.held.baselines, heldout_at_init=self.held.student(self.ema),
                  **self.tempered_start())
        from lib import fmnist

        images, labels = fmnist.load("train")
        self.tokens, self.labels = dh.fmnist_tensors(images, labels)
        self.start = time.time()

    def tempered_start(self):
        """Against a tempered teacher, the starting student at the same temperature as the
        sampler applies it (its input noise scaled), the alternative the fine-tune must beat."""
        t = self.args.teacher_temperature
        if t == 1 or t == self.args.noise_scale:
            return {}
        return {"heldout_at_init_noise_scaled": self.held.student(self.ema, noise_scale=t)}

    def note(self, **kv):
        print(json.dumps(kv), file=self.log, flush=True)

    def minutes(self):
        return round((time.time() - self.start) / 60, 2)

    def save(self, step, method, final=None, **extra):
        """OUT/student-last.pth in the layout distill_head's export reads (EMA weights as the
        student, the config, the args), with the method's text and the held-out record."""
        ck = dict(student=self.ema.state_dict(), student_raw=self.student.state_dict(),
                  config=self.ema.config(), minutes=round(self.minutes(), 1), steps=step, teacher_rows=0,
                  heldout=None, args=vars(self.args), clip_x0=self.clip, method=method,
                  energy=dict(student=final, baselines=self.held.baselines), **extra)
        path = os.path.join(self.args.out, "student-last.pth")
        torch.save(ck, path + ".tmp")
        os.replace(path + ".tmp", path)
        return path


def arguments(description, minutes):
    """The options every fine-tuning script takes; each adds its own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--pack", default="models/target", help="the target's pack: the teacher, the "
                    "regression head to start from, and where the student goes")
    ap.add_argument("--init", help="the distilled_head.onnx to start from (default: the pack's)")
    ap.add_argument("--target-ckpt", help="the target's checkpoint (default: rebuilt from --pack)")
    ap.add_argument("--out", help="training run folder (train.log, student-last.pth)")
    ap.add_argument("--minutes", type=float, default=minutes)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N: where training runs (torch >= 2.0 "
                    "off the CPU); the export runs on the CPU")
    ap.add_argument("--tf32", action="store_true", help="cuda: matmuls and convolutions in TF32 (faster, 10-bit mantissa)")
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--box-weight", type=float, default=10.0, help="weight of the penalty on raw outputs past the clip bounds")
    ap.add_argument("--stage-probs", default=",".join(str(p) for p in STAGE_PROBS),
                    help="how often each chain step (t = 999, 749, 500, 250) is trained")
    ap.add_argument("--k2-share", type=float, default=0.5, help="share of t = 500 inputs from K = 2's chain")
    ap.add_argument("--add-blocks", type=int, default=0, help="residual blocks added to the starting "
                    "student, zero-initialised (its function is unchanged at the start)")
    ap.add_argument("--teacher-temperature", type=float, default=1.0, help="the teacher sampler's "
                    "temperature (its injected noise's standard deviation times this), the held-out "
                    "reference's too")
    ap.add_argument("--noise-scale", type=float, default=1.0, help="the student's input noise and "
                    "re-noising times this in training and the held-out check: the sampler's "
                    "temperature the head is tuned for")
    ap.add_argument("--heldout-contexts", type=int, default=256)
    ap.add_argument("--heldout-samples", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replace", action="store_true", help="overwrite the pack's distilled head on export")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--ckpt", help="student checkpoint to export (--export-only)")
    return ap


def finish_record(ckpt, pack, threads=1):
    """A run stopped before its end leaves a checkpoint without the final held-out numbers:
    they are computed here (the same held-out set, same seeds) before the export records them."""
    ck = torch.load(ckpt, map_location="cpu")
    if (ck.get("energy") or {}).get("student") is not None:
        return
    torch.set_num_threads(threads)
    a = ck["args"]
    mar, clip = dh.frozen_target(argparse.Namespace(pack=pack, target_ckpt=a.get("target_ckpt")))
    held = HeldOut(mar, mar.diffloss.net, clip, a["heldout_contexts"], a["heldout_samples"],
                   temperature=a.get("teacher_temperature", 1.0), noise_scale=a.get("noise_scale", 1.0))
    student, _ = dh.load_student(ckpt)
    ck["energy"] = dict(student=held.student(student), baselines=held.baselines)
    torch.save(ck, ckpt)
    print(json.dumps(dict(ckpt=ckpt, heldout=ck["energy"])))


def run_main(ap, train):
    """Parses ap; exports --ckpt into --pack (--export-only) or trains and, with --replace,
    exports what it trained."""
    args = ap.parse_args()
    if args.export_only:
        if not args.ckpt:
            ap.error("--export-only needs --ckpt")
        finish_record(args.ckpt, args.pack, args.threads)
        dh.export_into_pack(args.ckpt, args.pack, args.replace)
        return
    if not args.out:
        ap.error("training needs --out")
    path = train(args)
    dh.use_device("cpu")
    if args.replace:
        dh.export_into_pack(path, args.pack, True)
