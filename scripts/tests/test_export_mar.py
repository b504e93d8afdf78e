"""Round trip of the official-architecture export without the real weights.

  /usr/bin/python3 scripts/tests/test_export_mar.py --out DIR

Builds a tiny MAR (preset test_tiny: the official structure at toy sizes, 4 classes, 4x4 grid,
patch size 2) and a tiny KL-VAE decoder with random weights, saves them in the official
checkpoint layouts ({"model", "model_ema", "args"} and {"model": AutoencoderKL state dict}),
exports DIR/pack with export_mar.py (and DIR/pack-external, its transformer's weights in
transformer.onnx.data), checks strict loading refuses broken checkpoints, and
writes DIR/parity.json: fixed inputs and the PyTorch outputs of the transformer, head and
decoder, which scripts/tests/export_test.go compares with ONNX Runtime (tolerance 1e-4). No ONNX
Runtime for Python exists here, so the ONNX side of the check runs in Go, through the same
runtime marspec uses.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from packs import export_mar
from lib import mar_official as mo


def randomise(module, gen, std=0.3):
    """Every parameter random (MAR zero-initialises the head's output and modulations, which
    would make the head's parity check pass trivially)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * std)
        for m in module.modules():  # norm gains near 1, so activations stay O(1)
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.GroupNorm)) and m.weight is not None:
                m.weight.add_(1.0)


def make_checkpoints(d, gen):
    cfg = mo.MAR_PRESETS["test_tiny"]
    raw = mo.build_mar(cfg)
    randomise(raw, gen)
    ema = mo.build_mar(cfg)
    ema.load_state_dict(raw.state_dict())
    with torch.no_grad():  # EMA differs from the raw weights, so the test sees which one was exported
        for p in ema.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
        # Keep the head's variance output (the second half, a learned-range interpolation
        # between log beta and the posterior log-variance) near [-1, 1]: far outside it the
        # variance extrapolates to e^90 and sampling overflows, which `generate` would turn
        # into a flat image. The epsilon half stays fully random.
        final = ema.diffloss.net.final_layer.linear
        half = final.out_features // 2
        final.weight[half:].mul_(0.02)
        final.bias[half:].mul_(0.02)
    args = argparse.Namespace(model="test_tiny", buffer_size=cfg["buffer_size"], diffloss_d=cfg["head_depth"])
    ckpt = os.path.join(d, "checkpoint-last.pth")
    torch.save({"model": raw.state_dict(), "model_ema": ema.state_dict(), "epoch": 0, "args": args}, ckpt)

    vae = mo.VAE(mo.VAE_PRESETS["test_tiny"])
    randomise(vae, gen, std=0.1)
    state = dict(vae.state_dict())
    # the parts of an AutoencoderKL checkpoint that decoding ignores
    state["encoder.conv_in.weight"] = torch.randn(32, 3, 3, 3, generator=gen)
    state["quant_conv.weight"] = torch.randn(8, 8, 1, 1, generator=gen)
    vae_path = os.path.join(d, "kl16.ckpt")
    torch.save({"model": state}, vae_path)
    return ckpt, vae_path, raw, ema, vae, cfg


def expect_error(fn, want):
    try:
        fn()
    except ValueError as e:
        if want not in str(e):
            raise AssertionError(f"error {e!s:.300} lacks {want!r}")
        return
    raise AssertionError(f"no error, want one containing {want!r}")


def check_strict_loading(d, ckpt, vae_path):
    ck = torch.load(ckpt)
    bad = dict(ck, model_ema=dict(ck["model_ema"]))
    del bad["model_ema"]["diffloss.net.final_layer.linear.bias"]
    bad["model_ema"]["extra.weight"] = torch.zeros(1)
    p = os.path.join(d, "bad.pth")
    torch.save(bad, p)
    expect_error(lambda: export_mar.load_mar(p, "test_tiny", "model_ema"), "missing keys: diffloss.net.final_layer.linear.bias")
    expect_error(lambda: export_mar.load_mar(p, "test_tiny", "model_ema"), "unexpected keys: extra.weight")
    expect_error(lambda: export_mar.load_mar(ckpt, "mar_base", "model_ema"), "shape mismatch: class_emb.weight is [4, 32], want [1000, 768]")
    torch.save({"model": ck["model"]}, p)
    expect_error(lambda: export_mar.load_mar(p, "test_tiny", "model_ema"), "no 'model_ema' entry")
    vs = torch.load(vae_path)["model"]
    vs = {k: v for k, v in vs.items() if k != "decoder.mid.attn_1.q.weight"}
    vs["decoder.bogus"] = torch.zeros(1)
    torch.save({"model": vs}, p)
    expect_error(lambda: export_mar.load_vae(p, "test_tiny"), "missing keys: decoder.mid.attn_1.q.weight")
    expect_error(lambda: export_mar.load_vae(p, "test_tiny"), "unexpected keys: decoder.bogus")


def check_published_settings():
    """Each MAR size's manifest settings are the official README's evaluation arguments, and a
    pack that is not 256 tokens is refused them by name."""
    for size, cfg in (("mar_base", 2.9), ("mar_large", 3.0), ("mar_huge", 3.2)):
        s = export_mar.published_settings(size, 256)
        paper, speed, unguided = s["presets"]["paper"], s["presets"]["speed"], s["presets"]["unguided"]
        got = (paper["num_iter"], paper["steps"], paper["cfg"], paper["cfg_schedule"], paper["temperature"])
        assert got == (256, 100, cfg, "linear", 1.0), (size, got)
        assert (speed["num_iter"], speed["cfg"]) == (64, cfg), (size, speed)
        assert (unguided["cfg"], unguided["temperature"], unguided["num_iter"]) == (1.0, 0.95, 256), (size, unguided)
        d = s["defaults"]
        assert (d["num_iter"], d["steps"], d["cfg"], d["cfg_schedule"], d["temperature"]) == got, (size, d)
        assert s["default_preset"] == s["evaluation_preset"] == "paper", size
        for p in [d] + list(s["presets"].values()):
            assert p["provenance"].startswith("published: MAR official README"), p["provenance"]
    expect_error(lambda: export_mar.published_settings("mar_base", 16), "published settings are for 256 tokens")
    expect_error(lambda: export_mar.published_settings("test_tiny", 256), "no published settings for 'test_tiny'")


def check_unpatchify(gen):
    """Against MAR's definition written as loops: token (row, col) channel c, offset (i, j)."""
    g, p, c = 3, 2, 2
    tok = torch.randn(1, g * g, c * p * p, generator=gen)
    got = mo.unpatchify(tok, g, p, c)
    for r in range(g):
        for col in range(g):
            for ch in range(c):
                for i in range(p):
                    for j in range(p):
                        want = tok[0, r * g + col, ch * p * p + i * p + j]
                        assert got[0, ch, r * p + i, col * p + j] == want, "unpatchify order differs from MAR's"


def flat(t):
    return [round(float(v), 8) for v in t.detach().double().flatten()]


def parity_cases(model, vae, cfg, gen):
    L, D, W = model.seq_len, model.token_dim, model.class_emb.weight.shape[1]
    b = 3
    tokens = torch.randn(b, L, D, generator=gen)
    mask = torch.ones(b, L)
    mask[0, :5] = 0          # rows know different numbers of tokens
    mask[1, :] = 0           # all known
    ids = torch.tensor([1, 3, 0])
    drop = torch.tensor([0.0, 0.0, 1.0])  # row 2: the "no class" embedding (CFG)
    n = 5
    xt, t, z = torch.randn(n, D, generator=gen), torch.tensor([0.0, 1.0, 250.0, 600.0, 999.0]), torch.randn(n, W, generator=gen)
    toks = torch.randn(2, L, D, generator=gen) * mo.LATENT_SCALE
    with torch.no_grad():
        zt = model.forward_keep(tokens, mask, ids, drop)
        # the keep-and-mask encoder must equal MAR's drop-the-masked-tokens encoder
        for r in range(b):
            drop_path = model.forward_drop(tokens[r:r + 1], mask[r:r + 1], ids[r:r + 1], drop[r:r + 1])
            err = (drop_path - zt[r:r + 1]).abs().max().item()
            assert err < 1e-4, f"row {r}: masked-key encoder differs from the dropping encoder by {err}"
        # the exported path: the encoder over the known tokens only, rows padded to the longest
        err = (model.forward_compact(tokens, mask, ids, drop) - zt).abs().max().item()
        assert err < 1e-5, f"compact encoder differs from the masked-key encoder by {err}"
        out = model.diffloss.net(xt, t, z)
        img = mo.DecoderGraph(vae, cfg)(toks)
    return {
        "transformer": {"batch": b, "tokens": flat(tokens), "mask": flat(mask), "class_ids": ids.tolist(),
                        "drop_class": flat(drop), "z": flat(zt)},
        "head": {"n": n, "x_t": flat(xt), "t": flat(t), "z": flat(z), "out": flat(out)},
        "decoder": {"batch": 2, "tokens": flat(toks), "image": flat(img), "shape": list(img.shape)},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    start = time.time()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(7)
    os.makedirs(args.out, exist_ok=True)
    ckpt, vae_path, raw, ema, vae, cfg = make_checkpoints(args.out, gen)
    check_strict_loading(args.out, ckpt, vae_path)
    check_unpatchify(gen)
    check_published_settings()
    pack = os.path.join(args.out, "pack")
    export_mar.main(["--ckpt", ckpt, "--model", "test_tiny", "--vae", vae_path, "--vae-config", "test_tiny",
                     "--out", pack, "--name", "mar-test-tiny", "--sampling-steps", "10"])
    # the same weights with the transformer's in transformer.onnx.data, as MAR-H's must be
    export_mar.main(["--ckpt", ckpt, "--model", "test_tiny", "--vae", vae_path, "--vae-config", "test_tiny",
                     "--out", os.path.join(args.out, "pack-external"), "--name", "mar-test-tiny", "--sampling-steps", "10",
                     "--external-data"])
    # PyTorch outputs from the EMA weights (the default), so exporting the raw ones would fail parity
    cases = parity_cases(ema, vae, cfg, gen)
    cases["raw_differs"] = float((raw.forward_keep(*export_mar.sample_inputs(cfg, raw)) -
                                  ema.forward_keep(*export_mar.sample_inputs(cfg, ema))).abs().max())
    with open(os.path.join(args.out, "parity.json"), "w") as f:
        json.dump(cases, f)
    print(f"test_export_mar: pack {pack}, {time.time() - start:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
