"""Checks of the distribution-matching head (scripts/train/dmd_head.py) against a teacher whose
answer is known, in about a minute, no data.

  /usr/bin/python3 scripts/tests/test_dmd_head.py

The teacher is analytic: given a context z, its tokens are Gaussian, x0 ~ N(m(z), s^2 I) with
m(z) = z[:2] and s = 0.3, so its epsilon at x_t = a x0 + b n is exactly
b (x_t - a m) / (a^2 s^2 + b^2). The student (DistilledHead, D = 2, from a zero output layer,
i.e. x0 = sqrt(abar) x_t, nearly a point mass at 0) and the fake score (a small MAR head) are
trained with dmd_head.dmd_update only: no teacher samples, no trajectories.

1. dmd_grad is zero when the fake score equals the real one (the fixed point of the objective).
2. The check below fails at the initial student (so it can fail).
3. After training, on 64 held-out contexts x 400 samples each, for K = 1, 2 and 4: the samples'
   per-context mean within 0.06 of m (mean absolute error over contexts and dimensions; the
   sampling error alone is 0.3 / sqrt(400) = 0.015) and their standard deviation within 15% of
   s, pooled over contexts. A regression onto any single endpoint would give the right mean
   and a spread of 0; matching the distribution is what brings the spread to s.
4. load_onnx_student reads an exported head back into the module with the same outputs (the
   script starts from the pack's distilled_head.onnx, whose checkpoint is not committed).
Exits non-zero with a message naming the failed check.
"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.marmodel import SimpleMLPAdaLN  # noqa: E402
from train import distill_head as dh  # noqa: E402
from train import dmd_head  # noqa: E402

D, W, S = 2, 4, 0.3


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def analytic_eps(x, tau, z, z_u, cfg):
    acp = torch.from_numpy(dh.BASE.acp).float()[tau.long()][:, None]
    a, b = acp.sqrt(), (1 - acp).sqrt()
    return b * (x - a * z[:, :D]) / (a * a * S * S + b * b)


def check(student, z, samples, seed):
    """(mean error, pooled std ratio) for each K over contexts z [C,W], samples per context."""
    gen = torch.Generator().manual_seed(seed)
    c = z.shape[0]
    zz = z.repeat_interleave(samples, dim=0)
    cfg = torch.ones(zz.shape[0])
    out = {}
    with torch.no_grad():
        for k in dh.STUDENT_STEPS:
            x_T = torch.randn(zz.shape[0], D, generator=gen)
            eps = torch.randn(k, zz.shape[0], D, generator=gen)
            x = dh.sample_student(student, zz, zz, cfg, x_T, eps, k, clip=False).reshape(c, samples, D)
            mean_err = float((x.mean(1) - z[:, :D]).abs().mean())
            std_ratio = float(x.std(1).pow(2).mean().sqrt() / S)
            out[k] = (mean_err, std_ratio)
    return out


def good(result):
    return all(m < 0.06 and abs(r - 1) < 0.15 for m, r in result.values())


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # 1. the fixed point
    x0 = torch.randn(64, D)
    tau = torch.randint(dmd_head.TAU_MIN, dmd_head.TAU_MAX + 1, (64,))
    z = torch.randn(64, W)
    same = lambda x: analytic_eps(x, tau.float(), z, z, None)
    g = dmd_head.dmd_grad(x0, tau, torch.randn(64, D), same, lambda x, real: same(x))
    if g.abs().max() > 1e-6:
        fail(f"dmd_grad is {g.abs().max():.3g}, not 0, when the fake score equals the real one")

    student = dh.DistilledHead(D, W, 48, 2)
    teacher_shape = SimpleMLPAdaLN(D, 48, 2 * D, W, 2)
    fake = dmd_head.FakeScore(analytic_eps, teacher_shape, W)
    held = torch.randn(64, W, generator=torch.Generator().manual_seed(7))
    # 2. the check can fail
    at_init = check(student, held, 400, 11)
    if good(at_init):
        fail(f"the check passes the untrained student: {at_init}")
    # 3. train on the analytic score alone
    opt = torch.optim.AdamW(student.parameters(), lr=2e-3, betas=(0.0, 0.99))
    fake_opt = torch.optim.AdamW(fake.parameters(), lr=2e-3, betas=(0.0, 0.99))
    gen = torch.Generator().manual_seed(3)
    for step in range(2500):
        zb = torch.randn(256, W, generator=gen)
        for grp in opt.param_groups:
            grp["lr"] = 2e-3 * min(1.0, (step + 1) / 100) * (0.1 if step >= 2000 else 1.0)
        dmd_head.dmd_update(student, fake, opt, fake_opt, zb, zb, torch.ones(256), analytic_eps,
                            clip=False, fake_updates=2, gen=gen)
    after = check(student, held, 400, 13)
    print({"at_init": at_init, "trained": after})
    if not good(after):
        fail(f"after DMD the K-step samples do not match N(m, {S}^2): (mean error, std ratio) "
             f"per K {after}")
    # 4. the ONNX round trip of the starting point
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "distilled_head.onnx")
        dh.export_graph(student, path)
        back = dmd_head.load_onnx_student(path)
        x, t = torch.randn(8, D), torch.tensor([999.0, 749, 500, 250] * 2)
        zz = torch.randn(8, W)
        with torch.no_grad():
            diff = (back(x, t, zz, zz, torch.ones(8)) - student(x, t, zz, zz, torch.ones(8))).abs().max()
        if diff > 1e-6:
            fail(f"load_onnx_student: the head read back differs by {diff:.3g}")
    print("ok")


if __name__ == "__main__":
    main()
