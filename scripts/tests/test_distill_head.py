"""Checks of the distilled head's export on a random tiny student, in a few seconds, no data.

  /usr/bin/python3 scripts/tests/test_distill_head.py [--out DIR]

1. The teacher's ODE records x_T itself as the state at t = 999, and with guidance scale 1 it
   ignores z_uncond (what lets unguided rows pass z twice).
2. The student's v parametrisation: at t = 999 its x0 barely depends on x_t's scale
   (sqrt(alphabar) ~ 4e-5), and a student with a zero output layer returns sqrt(alphabar) x_t.
3. The teacher follows clip_x0: clipped, its endpoints stay in [-1, 1]; unclipped (VAE
   latents), a random head's leave it.
4. Self contexts: self_generate fills every position of every sequence, the same seed gives
   the same sequences, and teacher_noise puts the teacher's endpoint back on the teacher's
   states at the student's times.
5. A few training steps on teacher data from self contexts of a random tiny MAR lower the
   loss (the training loop's pieces fit together).
6. Export writes DIR/distilled_head.onnx with the input and output names the Go sampler
   expects, DIR/entry.json (the manifest entry) and DIR/parity.json: fixed inputs (rows
   guided and not) with the PyTorch student's single-call x0 and the K-step sampler's tokens
   for K = 1, 2, 4 from given noise, for a Go test to compare with ONNX Runtime through
   mar.Denoiser.
Exits non-zero with a message naming the failed check.
"""
import argparse
import json
import os
import sys
import tempfile

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from train import distill_head as dh  # noqa: E402
from lib.marmodel import MAR  # noqa: E402

D, W = 16, 32


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def random_student(seed=0):
    torch.manual_seed(seed)
    s = dh.DistilledHead(D, W, 32, 1)
    with torch.no_grad():  # not MAR's zero init: every input must move the output
        for p in s.parameters():
            p.normal_(0, 0.05)
    return s.eval()


def tiny_mar(seed=0):
    torch.manual_seed(seed)
    return MAR(seq_len=49, token_dim=D, width=W, enc_depth=1, dec_depth=1, heads=2,
               buffer_size=4, head_width=32, head_depth=1).eval()


def check_teacher():
    mar = tiny_mar()
    with torch.no_grad():
        for p in mar.diffloss.net.parameters():
            p.normal_(0, 0.1)
    teacher = dh.Teacher(mar.diffloss.net)
    gen = torch.Generator().manual_seed(1)
    z, zu = torch.randn(6, W, generator=gen), torch.randn(6, W, generator=gen)
    x_T = torch.randn(6, D, generator=gen)
    states, x0 = teacher.run(z, zu, torch.ones(6), x_T)
    if not torch.equal(states[999], x_T):
        fail("the teacher's state at t = 999 is not x_T")
    _, x0b = teacher.run(z, torch.randn(6, W, generator=gen), torch.ones(6), x_T)
    if not torch.equal(x0, x0b):
        fail("with guidance scale 1 the teacher's endpoint depends on z_uncond")
    _, x0c = teacher.run(z, zu, torch.full((6,), 3.0), x_T)
    if torch.equal(x0, x0c):
        fail("guidance scale 3 gives the teacher's unguided endpoint")


def check_parametrisation():
    s = dh.DistilledHead(D, W, 32, 1)  # MAR's zero-initialised output layer
    x = torch.randn(4, D)
    t = torch.tensor([999.0, 749.0, 500.0, 250.0])
    out = s(x, t, torch.randn(4, W), torch.randn(4, W), torch.ones(4))
    want = torch.from_numpy(dh.BASE.sqrt_acp[[999, 749, 500, 250]]).float()[:, None] * x
    if (out - want).abs().max() > 1e-6:
        fail("a zero-output student does not return sqrt(alphabar) x_t")


def check_clip():
    mar = tiny_mar()
    with torch.no_grad():
        for p in mar.diffloss.net.parameters():
            p.normal_(0, 0.1)
    gen = torch.Generator().manual_seed(4)
    z, x_T = torch.randn(16, W, generator=gen), torch.randn(16, D, generator=gen)
    _, clipped = dh.Teacher(mar.diffloss.net, clip=True).run(z, z, torch.ones(16), x_T)
    _, free = dh.Teacher(mar.diffloss.net, clip=False).run(z, z, torch.ones(16), x_T)
    if clipped.abs().max() > 1 + 1e-6:
        fail(f"clipped teacher endpoint reaches {clipped.abs().max():.3g}")
    if not free.abs().max() > 1.5:
        fail(f"unclipped teacher endpoint stays within {free.abs().max():.3g}: is it still clipping?")


def check_self_contexts():
    mar = tiny_mar()
    teacher = dh.Teacher(mar.diffloss.net)
    tok, lab = dh.self_generate(mar, teacher, 5, 4, torch.Generator().manual_seed(5), batch=3)
    if tok.shape != (5, 49, D) or lab.shape != (5,) or not (0 <= lab.min() and lab.max() < 10):
        fail(f"self_generate shapes {tuple(tok.shape)} {tuple(lab.shape)}, labels {lab.tolist()}")
    if not torch.isfinite(tok).all() or (tok.abs().sum(-1) == 0).any():
        fail("self_generate left positions unwritten or not finite")
    tok2, lab2 = dh.self_generate(mar, teacher, 5, 4, torch.Generator().manual_seed(5), batch=3)
    if not (torch.equal(tok, tok2) and torch.equal(lab, lab2)):
        fail("self_generate is not reproducible from its generator")
    data = dh.make_data(mar, teacher, tok, lab, 5, 8, torch.Generator().manual_seed(6))
    for k in dh.STUDENT_STEPS:
        eps = dh.teacher_noise(data, k)
        for i, t in enumerate(dh.STUDENT_TIMES[k][1:], start=1):
            x = float(dh.BASE.sqrt_acp[t]) * data["x0"] + float(dh.BASE.sqrt_1m_acp[t]) * eps[i]
            if (x - data["states"][t]).abs().max() > 1e-4:
                fail(f"teacher_noise for K = {k} misses the teacher's state at t = {t}")


def check_training_steps():
    mar = tiny_mar()
    teacher = dh.Teacher(mar.diffloss.net)
    gen = torch.Generator().manual_seed(2)
    tokens, labels = dh.self_generate(mar, teacher, 8, 4, gen)
    data = dh.make_data(mar, teacher, tokens, labels, 8, 8, gen)
    s = dh.DistilledHead(D, W, 32, 1)
    opt = torch.optim.AdamW(s.parameters(), lr=3e-3)
    n = data["x0"].shape[0]

    def loss():
        x = data["states"][999]
        return ((s(x, torch.full((n,), 999.0), data["z"], data["z_u"], data["cfg"]) - data["x0"]) ** 2).mean()
    first = loss().item()
    for _ in range(30):
        opt.zero_grad()
        l = loss()
        l.backward()
        opt.step()
    if not loss().item() < 0.8 * first:
        fail(f"30 steps on one batch did not lower the loss below 80% ({first:.4f} -> {loss().item():.4f})")


def export_parity(out):
    s = random_student()
    path = os.path.join(out, "distilled_head.onnx")
    dh.export_graph(s, path)
    g = onnx.load(path).graph
    names = [i.name for i in g.input], [o.name for o in g.output]
    if names != (["x_t", "t", "z", "z_uncond", "cfg"], ["x0"]):
        fail(f"graph inputs/outputs {names}")
    with open(os.path.join(out, "entry.json"), "w") as f:
        json.dump(dh.manifest_entry("distilled_head.onnx", None), f)
    gen = torch.Generator().manual_seed(3)
    n = 6
    z, zu = torch.randn(n, W, generator=gen), torch.randn(n, W, generator=gen)
    cfg = torch.tensor([1.0, 1.0, 1.5, 2.0, 3.0, 4.0])
    zu[:2] = z[:2]  # unguided rows pass z twice
    x_t = torch.randn(n, D, generator=gen) * 0.7
    t = torch.tensor([999.0, 250.0, 500.0, 749.0, 999.0, 250.0])
    fx = dict(n=n, dim=D, width=W, z=z.flatten().tolist(), z_uncond=zu.flatten().tolist(),
              cfg=cfg.tolist(), x_t=x_t.flatten().tolist(), t=t.tolist(), runs={})
    with torch.no_grad():
        fx["x0"] = s(x_t, t, z, zu, cfg).flatten().tolist()
        for k in dh.STUDENT_STEPS:
            x_T = torch.randn(n, D, generator=gen)
            eps = torch.randn(k, n, D, generator=gen)
            tok = dh.sample_student(s, z, zu, cfg, x_T, eps, k)
            fx["runs"][str(k)] = dict(x_T=x_T.flatten().tolist(), eps=eps.flatten().tolist(),
                                      tokens=tok.flatten().tolist())
    with open(os.path.join(out, "parity.json"), "w") as f:
        json.dump(fx, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="folder for the graph and parity.json (default: a temporary one)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    check_teacher()
    check_parametrisation()
    check_clip()
    check_self_contexts()
    check_training_steps()
    out = args.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    export_parity(out)
    print("ok: teacher, parametrisation, clip_x0, self contexts, training steps, export to " + out)


if __name__ == "__main__":
    main()
