"""Checks of the early-exit split on a random tiny MAR, in a few seconds, no data needed.

  /usr/bin/python3 scripts/tests/test_early_exit.py [--out DIR]

1. The split is exact: exit_rest(hidden after k blocks) equals forward_keep's z within 1e-5,
   for every k, with per-row masks (including a row with nothing known) and dropped classes.
2. The exit head built from the target is the target's decoder with the middle cut out: with
   as many exit blocks as decoder blocks and k = all encoder blocks it reproduces forward_keep.
3. Export writes exit_draft.onnx and exit_rest.onnx (into DIR, or a temporary folder) with the
   input and output names and shapes the Go engine expects, and DIR/parity.json: fixed inputs
   (batch 4, width 32) with the PyTorch outputs of both graphs (z_exit, exit_logvar, hidden, z),
   for a Go test to compare with ONNX Runtime.
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
from train import early_exit as ee  # noqa: E402
from lib.marmodel import MAR  # noqa: E402

TOL = 1e-5


def tiny_mar(seed=0):
    torch.manual_seed(seed)
    mar = MAR(seq_len=49, token_dim=16, width=32, enc_depth=2, dec_depth=2, heads=2,
              buffer_size=4, head_width=32, head_depth=1)
    with torch.no_grad():  # random, not MAR's zero-initialised tokens, so masks matter
        for p in [mar.mask_token, mar.fake_latent, mar.encoder_pos_embed_learned]:
            p.normal_()
    return mar.eval()


def check(name, ok, detail):
    if not ok:
        sys.exit(f"FAIL {name}: {detail}")
    print(f"ok   {name}: {detail}")


def io_names(path):
    g = onnx.load(path).graph
    shapes = lambda vs: {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                         for v in vs}
    return shapes(g.input), shapes(g.output)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="folder for the exported graphs (default: a temporary one)")
    args = ap.parse_args()
    mar = tiny_mar()
    for k in range(1, len(mar.encoder_blocks) + 1):
        d = ee.check_split(mar, k)
        check(f"split at depth {k}", d <= TOL, f"max |rest(hidden) - forward_keep| = {d:.2g}")

    # the exit head at full depth, with all decoder blocks, is the target itself
    full = ee.ExitHead.from_target(mar, len(mar.decoder_blocks))
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randn(4, 49, 16, generator=gen)
    mask = ee.sample_masks(4, 49, gen)
    ids = torch.tensor([0, 1, 2, 3])
    drop = torch.tensor([0.0, 1.0, 0.0, 1.0])
    with torch.no_grad():
        z = mar.forward_keep(tokens, mask, ids, drop)
        h = mar.encode_until(tokens, mask, ids, drop, len(mar.encoder_blocks))
        z_exit, logvar = full(h, mask)
    d = (z - z_exit).abs().max().item()
    check("exit head initialised from the target", d <= TOL, f"max |z_exit - z| = {d:.2g}")
    check("exit_logvar shape", tuple(logvar.shape) == (4, 49), str(tuple(logvar.shape)))

    out = args.out or tempfile.mkdtemp(prefix="early-exit-")
    os.makedirs(out, exist_ok=True)
    ex = ee.ExitHead.from_target(mar, 1)
    draft, rest = ee.export_graphs(mar, ex, 1, out)
    ins, outs = io_names(draft)
    want_in = {"tokens": ["B", 49, 16], "mask": ["B", 49], "class_ids": ["B"], "drop_class": ["B"]}
    want_out = {"z_exit": ["B", 49, 32], "exit_logvar": ["B", 49], "hidden": ["B", 53, 32]}
    check("exit_draft.onnx inputs", ins == want_in, str(ins))
    check("exit_draft.onnx outputs", outs == want_out, str(outs))
    ins, outs = io_names(rest)
    check("exit_rest.onnx inputs", ins == {"hidden": ["B", 53, 32], "mask": ["B", 49]}, str(ins))
    check("exit_rest.onnx outputs", outs == {"z": ["B", 49, 32]}, str(outs))
    onnx.checker.check_model(draft)
    onnx.checker.check_model(rest)

    # the check above can fail: continuing from the wrong depth is caught
    with torch.no_grad():
        h1 = mar.encode_until(tokens, mask, ids, drop, 1)
        wrong = (mar.finish_from(h1, mask, 2) - z).abs().max().item()
    check("a wrong split depth is detected", wrong > 1e-3, f"max diff {wrong:.2g}")

    # PyTorch outputs of both graphs on fixed inputs, for an ONNX Runtime comparison in Go
    with torch.no_grad():
        ze, lv, hid = ee.DraftGraph(mar, ex, 1)(tokens, mask, ids, drop)
        zr = ee.RestGraph(mar, 1)(hid, mask)
    flat = lambda t: [round(float(v), 7) for v in t.reshape(-1)]
    parity = dict(batch=4, tokens=flat(tokens), mask=flat(mask), class_ids=ids.tolist(),
                  drop_class=flat(drop), z_exit=flat(ze), exit_logvar=flat(lv), hidden=flat(hid),
                  z=flat(zr), width=32, hidden_len=53)
    with open(os.path.join(out, "parity.json"), "w") as f:
        json.dump(parity, f)
    print(f"graphs and parity.json in {out}")


if __name__ == "__main__":
    main()
