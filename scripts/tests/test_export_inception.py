"""Fixtures for the standard evaluator's checks, with random weights (scripts/tests/inception_test.go).

  /usr/bin/python3 scripts/tests/test_export_inception.py --out DIR
  /usr/bin/python3 scripts/tests/test_export_inception.py --fid A.npy B.npy

--out checks that --weights loading takes pytorch-fid's names and refuses a file missing a
tensor, exports a random FID Inception pack to DIR/pack (as export_inception.py --random does)
and writes:
  DIR/a, DIR/b        8 PNGs each: a has 256x256 RGB, one grey 256x256 and one 150x200 RGB
                      image; b has 8 RGB 256x256 images
  DIR/resized.npy     float32 [8,3,299,299]: folder a resized by tf1_resize below, 0-255
  DIR/features.npy, DIR/logits.npy   PyTorch's outputs on resized.npy scaled (x-128)/128
  DIR/ref_images.npz  ADM's layout without statistics: arr_0 = folder b as uint8 [8,256,256,3]
  DIR/ref_stats.npz   ADM's full layout: arr_0, mu, sigma, mu_s, sigma_s (synthetic values)
--fid prints the FID of two feature matrices [n,d] computed independently of marspec's
method: tr((S1 S2)^1/2) is the nuclear norm of A B^T / sqrt((n-1)(m-1)) for the centred
feature matrices A and B (S1 = A^T A/(n-1)), exact also when n << d as here, where sqrtm of a
singular product is not.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.pngfile import write_png


def tf1_resize(img, out_h, out_w):
    """TF1's resize_bilinear (align_corners=False, half_pixel_centers=False) of [C,H,W], the
    interpolation in float64: source coordinate = output index * in/out, floor and next (clamped), lerp along x
    on both rows then along y."""
    c, h, w = img.shape

    def coords(n_in, n_out):
        # TF1 computes the scale, the source coordinate and the weight in float32
        s = np.arange(n_out, dtype=np.float32) * (np.float32(n_in) / np.float32(n_out))
        lo = np.floor(s).astype(np.int64)
        return lo, np.minimum(lo + 1, n_in - 1), (s - lo.astype(np.float32)).astype(np.float64)

    y0, y1, yl = coords(h, out_h)
    x0, x1, xl = coords(w, out_w)
    img = img.astype(np.float64)
    top = img[:, y0][:, :, x0] + (img[:, y0][:, :, x1] - img[:, y0][:, :, x0]) * xl
    bottom = img[:, y1][:, :, x0] + (img[:, y1][:, :, x1] - img[:, y1][:, :, x0]) * xl
    return top + (bottom - top) * yl[:, None]


def check_weights_loading(model, out):
    """--weights reads pytorch-fid's names (with the batch-norm counters and an auxiliary head
    a torchvision-layout file may carry) and refuses a file missing a tensor, naming it."""
    import torch
    from packs import export_inception as ei

    state = dict(model.state_dict())
    state["Conv2d_1a_3x3.bn.num_batches_tracked"] = torch.tensor(0)
    state["AuxLogits.fc.weight"] = torch.zeros(1008, 768)
    path = os.path.join(out, "weights.pth")
    torch.save(state, path)
    fresh = ei.FIDInception()
    ei.load_weights(fresh, path)
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), "load_weights changed " + k
    del state["Mixed_7c.branch_pool.conv.weight"]
    torch.save(state, path)
    try:
        ei.load_weights(ei.FIDInception(), path)
    except SystemExit as e:
        assert "missing 1 (Mixed_7c.branch_pool.conv.weight)" in str(e), str(e)
    else:
        raise AssertionError("a state dict without Mixed_7c.branch_pool.conv.weight was loaded")
    os.remove(path)


def fixtures(out):
    import torch
    from packs import export_inception as ei

    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = ei.FIDInception()
    ei.randomise(model, seed=3)
    ei.export(model, os.path.join(out, "pack"), "inception-random", "random weights, seed 3 (tests only)")

    check_weights_loading(model, out)

    rng = np.random.default_rng(7)
    a = [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(6)]
    a.append(rng.integers(0, 256, (256, 256), dtype=np.uint8))
    a.append(rng.integers(0, 256, (150, 200, 3), dtype=np.uint8))  # H 150, W 200
    b = [rng.integers(0, 256, (256, 256, 3), dtype=np.uint8) for _ in range(8)]
    for name, imgs in (("a", a), ("b", b)):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for i, img in enumerate(imgs):
            write_png(os.path.join(out, name, "%02d.png" % i), img)

    def chw(img):
        return np.broadcast_to(img[None], (3,) + img.shape) if img.ndim == 2 else img.transpose(2, 0, 1)

    resized = np.stack([tf1_resize(chw(img), 299, 299) for img in a]).astype(np.float32)
    np.save(os.path.join(out, "resized.npy"), resized)
    model.eval()
    with torch.no_grad():
        feats, logits = model((torch.from_numpy(resized) - 128) / 128)
    np.save(os.path.join(out, "features.npy"), feats.numpy())
    np.save(os.path.join(out, "logits.npy"), logits.numpy())

    np.savez(os.path.join(out, "ref_images.npz"), np.stack(b))
    mu = rng.normal(size=16)  # the layout matters here, not the size
    m = rng.normal(size=(16, 4))
    np.savez(os.path.join(out, "ref_stats.npz"), np.stack(b[:2]), mu=mu, sigma=m @ m.T / 4,
             mu_s=rng.normal(size=7), sigma_s=np.eye(7))
    print(json.dumps({"features_std": float(feats.std()), "logits_std": float(logits.std())}))


def fid(path_a, path_b):
    fa, fb = np.load(path_a).astype(np.float64), np.load(path_b).astype(np.float64)
    a, b = fa - fa.mean(0), fb - fb.mean(0)
    s1, s2 = np.cov(fa, rowvar=False), np.cov(fb, rowvar=False)
    tr_sqrt = np.linalg.svd(a @ b.T, compute_uv=False).sum() / np.sqrt((len(fa) - 1) * (len(fb) - 1))
    d = fa.mean(0) - fb.mean(0)
    print(json.dumps({"fid": float(d @ d + np.trace(s1) + np.trace(s2) - 2 * tr_sqrt)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--fid", nargs=2)
    args = ap.parse_args()
    if args.fid:
        fid(*args.fid)
    else:
        fixtures(args.out)


if __name__ == "__main__":
    main()
