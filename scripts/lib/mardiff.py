"""Gaussian diffusion for MAR's head (improved-DDPM: cosine schedule, epsilon prediction,
learned-range variance, hybrid loss), in float64 numpy for the schedule.

The sampler here is the reference the Go sampler is checked against (golden fixtures).
"""
import math

import numpy as np
import torch


def cosine_betas(T):
    f = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
    return np.array([min(1 - f((i + 1) / T) / f(i / T), 0.999) for i in range(T)], dtype=np.float64)


def space_timesteps(T, n):
    if n == T:
        return list(range(T))
    stride = (T - 1) / (n - 1)
    cur, taken = 0.0, []
    for _ in range(n):
        taken.append(round(cur))
        cur += stride
    return sorted(set(taken))


class Diffusion:
    def __init__(self, betas, timestep_map=None):
        self.betas = betas
        self.T = len(betas)
        self.timestep_map = timestep_map if timestep_map is not None else list(range(self.T))
        a = 1.0 - betas
        self.acp = np.cumprod(a)
        self.acp_prev = np.append(1.0, self.acp[:-1])
        self.sqrt_acp = np.sqrt(self.acp)
        self.sqrt_1m_acp = np.sqrt(1 - self.acp)
        self.sqrt_recip_acp = np.sqrt(1 / self.acp)
        self.sqrt_recipm1_acp = np.sqrt(1 / self.acp - 1)
        self.post_var = betas * (1 - self.acp_prev) / (1 - self.acp)
        self.post_logvar_clipped = np.log(np.append(self.post_var[1], self.post_var[1:]))
        self.coef1 = betas * np.sqrt(self.acp_prev) / (1 - self.acp)
        self.coef2 = (1 - self.acp_prev) * np.sqrt(a) / (1 - self.acp)

    @staticmethod
    def respaced(T, n):
        base = Diffusion(cosine_betas(T))
        keep = space_timesteps(T, n)
        last, betas = 1.0, []
        for i in keep:
            betas.append(1 - base.acp[i] / last)
            last = base.acp[i]
        return Diffusion(np.array(betas), keep)

    def _g(self, arr, k):  # gather per-row schedule values as float64 tensors
        return torch.from_numpy(arr[k.numpy()]).double()[:, None]

    def p_mean_logvar(self, k, xt, out, clip_x0):
        """k: [N] respaced indices; xt: [N,D] float64; out: [N,2D] network output."""
        d = xt.shape[1]
        eps, v = out[:, :d].double(), out[:, d:].double()
        x0 = self._g(self.sqrt_recip_acp, k) * xt - self._g(self.sqrt_recipm1_acp, k) * eps
        if clip_x0:
            x0 = x0.clamp(-1, 1)
        mean = self._g(self.coef1, k) * x0 + self._g(self.coef2, k) * xt
        frac = (v + 1) / 2
        logvar = frac * self._g(np.log(self.betas), k) + (1 - frac) * self._g(self.post_logvar_clipped, k)
        return mean, logvar, x0

    # ---- training (full 1000-step schedule) ----
    def q_sample(self, x0, t, noise):
        return self._g(self.sqrt_acp, t).float() * x0 + self._g(self.sqrt_1m_acp, t).float() * noise

    def loss(self, net, x0, t, z):
        """MSE on epsilon + variational bound with the mean frozen (improved DDPM hybrid)."""
        noise = torch.randn_like(x0)
        xt = self.q_sample(x0, t, noise)
        out = net(xt, t, z)
        d = x0.shape[1]
        mse = ((out[:, :d] - noise) ** 2).mean(dim=1)
        frozen = torch.cat([out[:, :d].detach(), out[:, d:]], dim=1)
        mean, logvar, _ = self.p_mean_logvar(t, xt.double(), frozen.double(), clip_x0=False)
        true_mean = self._g(self.coef1, t) * x0.double() + self._g(self.coef2, t) * xt.double()
        true_logvar = self._g(self.post_logvar_clipped, t)
        kl = 0.5 * (-1.0 + logvar - true_logvar + torch.exp(true_logvar - logvar)
                    + (true_mean - mean) ** 2 * torch.exp(-logvar))
        kl = kl.mean(dim=1) / math.log(2.0)
        nll = -discretized_gaussian_loglik(x0.double(), mean, logvar).mean(dim=1) / math.log(2.0)
        vb = torch.where(t == 0, nll, kl)
        return (mse + vb.float()).mean(), mse.mean()


def _approx_std_normal_cdf(x):
    return 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def discretized_gaussian_loglik(x, mean, logvar):
    log_scale = 0.5 * logvar
    cx = x - mean
    inv = torch.exp(-log_scale)
    cdf_plus = _approx_std_normal_cdf(inv * (cx + 1 / 255.0))
    cdf_min = _approx_std_normal_cdf(inv * (cx - 1 / 255.0))
    log_cdf_plus = torch.log(cdf_plus.clamp(min=1e-12))
    log_1m_cdf_min = torch.log((1 - cdf_min).clamp(min=1e-12))
    delta = cdf_plus - cdf_min
    return torch.where(x < -0.999, log_cdf_plus,
                       torch.where(x > 0.999, log_1m_cdf_min, torch.log(delta.clamp(min=1e-12))))
