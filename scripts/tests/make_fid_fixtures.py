"""Reference FID / IS values computed with NumPy and SciPy for the Go tests (fid/testdata).

  /usr/bin/python3 scripts/tests/make_fid_fixtures.py
"""
import json
import os

import numpy as np
from scipy import linalg

TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fid", "testdata")
rng = np.random.default_rng(42)
d = 6
a = rng.normal(size=(300, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)
b = rng.normal(size=(250, d)) @ rng.normal(size=(d, d)) * 0.7 + rng.normal(size=d)


def stats(x):
    return x.mean(axis=0), np.cov(x, rowvar=False)


def fid(mu1, s1, mu2, s2):
    covmean, _ = linalg.sqrtm(s1.dot(s2), disp=False)
    covmean = covmean.real
    diff = mu1 - mu2
    return float(diff.dot(diff) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def inception_score(p, splits=10):
    scores = []
    n = len(p)
    for k in range(splits):
        part = p[k * n // splits:(k + 1) * n // splits]
        py = part.mean(axis=0, keepdims=True)
        kl = (part * (np.log(part) - np.log(py))).sum(axis=1).mean()
        scores.append(np.exp(kl))
    return float(np.mean(scores)), float(np.std(scores))


mu1, s1 = stats(a)
mu2, s2 = stats(b)
logits = rng.normal(size=(200, 5)) * 2
probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
is_mean, is_std = inception_score(probs)
out = dict(a=a.tolist(), b=b.tolist(), mu1=mu1.tolist(), sigma1=s1.tolist(), mu2=mu2.tolist(), sigma2=s2.tolist(),
           fid=fid(mu1, s1, mu2, s2), probs=probs.tolist(), is_mean=is_mean, is_std=is_std)
with open(os.path.join(TESTDATA, "scipy_reference.json"), "w") as f:
    json.dump(out, f)
np.savez(os.path.join(TESTDATA, "stats_numpy.npz"), mu=mu1, sigma=s1)
print(out["fid"], is_mean, is_std)
