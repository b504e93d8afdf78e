"""Checks of the two objectives that fine-tune the few-step head toward a distribution
(scripts/train/energy_head.py, the pack's, and scripts/train/dmd_head.py) against a teacher
whose answer is known, in one to two minutes, no data.

  /usr/bin/python3 scripts/tests/test_head_matching.py

The teacher is analytic: given a context z, its tokens are Gaussian, x0 ~ N(m(z), s^2 I) with
m(z) = z[:2] and s = 0.3, so its epsilon at x_t = a x0 + b n is exactly
b (x_t - a m) / (a^2 s^2 + b^2). The student (DistilledHead, D = 2, from a zero output layer,
i.e. x0 = sqrt(abar) x_t, nearly a point mass at 0) and the fake score (a small MAR head) are
trained with dmd_head.dmd_update only (no teacher samples, no trajectories), or with
energy_head.update against exact samples of N(m, s^2) (no score).

1. dmd_grad is zero when the fake score equals the real one (the fixed point of the objective).
2. The check below fails at the initial student (so it can fail).
3. After training by each objective, on 64 held-out contexts x 400 samples each, for K = 1, 2 and 4: the samples'
   per-context mean within 0.1 of m (mean absolute error over contexts and dimensions; the
   sampling error alone is 0.3 / sqrt(400) = 0.015) and their standard deviation within 20% of
   s, pooled over contexts. A regression onto any single endpoint would give the right mean
   and a spread of 0; matching the distribution is what brings the spread to s.
4. energy_score is lower for samples of the right law than for a point mass at its mean.
5. load_onnx_student reads an exported head back into the module with the same outputs (the
   script starts from the pack's distilled_head.onnx, whose checkpoint is not committed).
6. energy training with the student's input noise scaled (--noise-scale 0.6, a head tuned for
   the temperature it runs at) brings the samples at that scale to the teacher's law; sampled at
   scale 1 the same student spreads wider (the scale is in what it learned).
7. deepened adds blocks that leave the trained student's outputs unchanged at the start, and
   the added blocks do change them once their gates move (they are not dead weight).
8. energy_head.learning_rate warms up over its updates, then falls linearly in wall-clock time
   to lr * lr_end at the run's last minute (and stays constant when lr_end is 1).
Exits non-zero with a message naming the failed check.
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.marmodel import SimpleMLPAdaLN  # noqa: E402
from train import distill_head as dh  # noqa: E402
from lib import headchain  # noqa: E402
from train import dmd_head  # noqa: E402
from train import energy_head  # noqa: E402

D, W, S = 2, 4, 0.3


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def analytic_eps(x, tau, z, z_u, cfg):
    acp = torch.from_numpy(dh.BASE.acp).float()[tau.long()][:, None]
    a, b = acp.sqrt(), (1 - acp).sqrt()
    return b * (x - a * z[:, :D]) / (a * a * S * S + b * b)


def check(student, z, samples, seed, noise_scale=1.0):
    """(mean error, pooled std ratio) for each K over contexts z [C,W], samples per context, the
    student's input noise and re-noising times noise_scale."""
    gen = torch.Generator().manual_seed(seed)
    c = z.shape[0]
    zz = z.repeat_interleave(samples, dim=0)
    cfg = torch.ones(zz.shape[0])
    out = {}
    with torch.no_grad():
        for k in dh.STUDENT_STEPS:
            x_T = noise_scale * torch.randn(zz.shape[0], D, generator=gen)
            eps = noise_scale * torch.randn(k, zz.shape[0], D, generator=gen)
            x = dh.sample_student(student, zz, zz, cfg, x_T, eps, k, clip=False).reshape(c, samples, D)
            mean_err = float((x.mean(1) - z[:, :D]).abs().mean())
            std_ratio = float(x.std(1).pow(2).mean().sqrt() / S)
            out[k] = (mean_err, std_ratio)
    return out


def good(result):
    return all(m < 0.1 and abs(r - 1) < 0.2 for m, r in result.values())


def train_dmd(student, steps=2000):
    fake = dmd_head.FakeScore(analytic_eps, SimpleMLPAdaLN(D, 48, 2 * D, W, 2), W)
    opt = torch.optim.AdamW(student.parameters(), lr=2e-3, betas=(0.0, 0.99))
    fake_opt = torch.optim.AdamW(fake.parameters(), lr=2e-3, betas=(0.0, 0.99))
    gen = torch.Generator().manual_seed(3)
    for step in range(steps):
        zb = torch.randn(256, W, generator=gen)
        for grp in opt.param_groups:
            grp["lr"] = 2e-3 * min(1.0, (step + 1) / 100) * (0.1 if step >= 0.8 * steps else 1.0)
        dmd_head.dmd_update(student, fake, opt, fake_opt, zb, zb, torch.ones(256), analytic_eps,
                            clip=False, fake_updates=2, gen=gen)


def train_energy(student, steps=1000, groups=32, m=16, noise_scale=1.0):
    opt = torch.optim.AdamW(student.parameters(), lr=2e-3, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(4)
    for step in range(steps):
        zb = torch.randn(groups, W, generator=gen)
        teacher = zb[:, None, :D] + S * torch.randn(groups, m, D, generator=gen)
        for grp in opt.param_groups:
            grp["lr"] = 2e-3 * min(1.0, (step + 1) / 100) * (0.1 if step >= 0.8 * steps else 1.0)
        energy_head.update(student, opt, zb, zb, torch.ones(groups), teacher, clip=False,
                           box_weight=0.0, gen=gen, noise_scale=noise_scale)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # 1. the fixed point of DMD
    x0 = torch.randn(64, D)
    tau = torch.randint(dmd_head.TAU_MIN, dmd_head.TAU_MAX + 1, (64,))
    z = torch.randn(64, W)
    same = lambda x: analytic_eps(x, tau.float(), z, z, None)
    g = dmd_head.dmd_grad(x0, tau, torch.randn(64, D), same, lambda x, real: same(x))
    if g.abs().max() > 1e-6:
        fail(f"dmd_grad is {g.abs().max():.3g}, not 0, when the fake score equals the real one")
    held = torch.randn(64, W, generator=torch.Generator().manual_seed(7))
    # 2. the check can fail
    at_init = check(dh.DistilledHead(D, W, 48, 2), held, 400, 11)
    if good(at_init):
        fail(f"the check passes the untrained student: {at_init}")
    # 3. each objective brings the untrained student to the teacher's law
    results = {"at_init": at_init}
    for name, fit in [("dmd", train_dmd), ("energy", train_energy)]:
        torch.manual_seed(1)
        student = dh.DistilledHead(D, W, 48, 2)
        fit(student)
        results[name] = check(student, held, 400, 13)
        if not good(results[name]):
            fail(f"after {name} training the K-step samples do not match N(m, {S}^2): "
                 f"(mean error, std ratio) per K {results[name]}")
    print(results)
    # 4. the energy score prefers the right law to its mean
    mean = torch.zeros(64, 16, D)
    right = S * torch.randn(64, 16, D)
    target = S * torch.randn(64, 16, D)
    if not energy_head.energy_score(right, target) < energy_head.energy_score(mean + 1e-3 * torch.randn(64, 16, D), target):
        fail("energy_score: a point mass at the mean scores better than samples of the law")
    # 5. the ONNX round trip of the starting point
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "distilled_head.onnx")
        dh.export_graph(student, path)
        back = headchain.load_onnx_student(path)
        x, t = torch.randn(8, D), torch.tensor([999.0, 749, 500, 250] * 2)
        zz = torch.randn(8, W)
        with torch.no_grad():
            diff = (back(x, t, zz, zz, torch.ones(8)) - student(x, t, zz, zz, torch.ones(8))).abs().max()
        if diff > 1e-6:
            fail(f"load_onnx_student: the head read back differs by {diff:.3g}")
    # 6. a head tuned at a noise scale matches the law at that scale, and not at scale 1
    torch.manual_seed(1)
    scaled = dh.DistilledHead(D, W, 48, 2)
    train_energy(scaled, noise_scale=0.6)
    at_scale, at_one = check(scaled, held, 400, 17, noise_scale=0.6), check(scaled, held, 400, 17)
    if not good(at_scale) or at_one[1][1] < 1.3:
        fail(f"energy training at noise scale 0.6: (mean error, std ratio) per K {at_scale} at that scale "
             f"(want the teacher's law), {at_one} at scale 1 (want K = 1 spread wider, ratio > 1.3)")
    print({"scaled_0.6": at_scale, "scaled_0.6_sampled_at_1": at_one})
    # 7. added blocks start as the identity and are trainable
    deeper = headchain.deepened(student, 2)
    if deeper.depth != student.depth + 2:
        fail(f"deepened: depth {deeper.depth}, want {student.depth + 2}")
    with torch.no_grad():
        same = (deeper(x, t, zz, zz, torch.ones(8)) - student(x, t, zz, zz, torch.ones(8))).abs().max()
        torch.nn.init.normal_(deeper.res_blocks[-1].adaLN_modulation[-1].bias, std=0.5)
        moved = (deeper(x, t, zz, zz, torch.ones(8)) - student(x, t, zz, zz, torch.ones(8))).abs().max()
    if same > 1e-6 or moved < 1e-4:
        fail(f"deepened: outputs differ by {same:.3g} at the start (want 0) and {moved:.3g} "
             f"once a gate moves (want > 0)")
    # 8. the learning rate: warm-up in updates, then linear in wall-clock time to lr * lr_end
    args = argparse.Namespace(lr=3e-5, warmup=50, minutes=40.0, lr_end=0.0)
    rates = [energy_head.learning_rate(args, s, m) for s, m in [(0, 0.0), (49, 0.1), (500, 10.0), (900, 40.0), (999, 50.0)]]
    want = [3e-5 / 50, 3e-5 * (1 - 0.1 / 40), 3e-5 * 0.75, 0.0, 0.0]
    args.lr_end = 1.0
    rates.append(energy_head.learning_rate(args, 500, 39.0))
    want.append(3e-5)
    if any(abs(r - w) > 1e-12 for r, w in zip(rates, want)):
        fail(f"learning_rate gave {rates}, want {want}")
    print("ok")


if __name__ == "__main__":
    main()
