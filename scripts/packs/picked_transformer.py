"""Add transformer_picked.onnx to a Fashion-MNIST-style pack: the transformer's z at chosen
positions only (marmodel.MAR.forward_picked), for AR steps whose head reads a few positions.

  /usr/bin/python3 scripts/packs/picked_transformer.py --pack models/target --fixture mar/testdata/parity_target.json

The graph takes transformer.onnx's inputs and at [B, K] (int64 positions, 0..L-1, a position
may repeat) and gives z [B, K, W]. It runs the last decoder block on the picked rows alone (the
blocks before it need every position): at the embedded target's 3 AR steps, which predict 7, 18
and 24 of 49 positions, a pass runs 1.17x faster at int8 (docs/BENCHMARKS.md). The weights come
from the pack's own graphs (ckpt_from_pack.rebuild, checked against the parity fixture when one
is given); the picked z is checked here against transformer.onnx's z (forward_compact) at the
same positions, --tol (1e-5). The manifest records the file under "picked"; run
scripts/packs/quantize_pack.py afterwards for its int8 variant.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from packs.ckpt_from_pack import rebuild_checked
from lib.graphs import PickedTransformerGraph

PICKED_FILE = "transformer_picked.onnx"


def sample(model, classes, rows, k, seed):
    """Inputs of rows that know different numbers of tokens, and k positions a row, some twice."""
    L, D = model.seq_len, model.token_dim
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(rows, L, D, generator=g)
    mask = (torch.rand(rows, L, generator=g) < torch.linspace(0.2, 1.0, rows)[:, None]).float()
    ids = torch.randint(0, classes, (rows,), generator=g)
    drop = (torch.arange(rows) % 3 == 2).float()
    at = torch.randint(0, L, (rows, k), generator=g)
    at[:, -1] = at[:, 0]
    return tokens, mask, ids, drop, at


def max_error(model, inputs):
    tokens, mask, ids, drop, at = inputs
    whole = model.forward_compact(tokens, mask, ids, drop)
    want = torch.gather(whole, 1, at[:, :, None].expand(-1, -1, whole.shape[2]))
    return (model.forward_picked(tokens, mask, ids, drop, at) - want).abs().max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", required=True)
    ap.add_argument("--fixture", help="parity fixture the rebuilt weights must reproduce (e.g. mar/testdata/parity_target.json)")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    model, manifest = rebuild_checked(args.pack, args.fixture, args.tol, "picked_transformer")
    classes = len(manifest["classes"])
    with torch.no_grad():
        err = max(max_error(model, sample(model, classes, rows, k, seed)) for rows, k, seed in [(5, 7, 1), (2, 1, 2), (3, 30, 3)])
        if err > args.tol:
            raise SystemExit(f"picked_transformer: picked z differs from the whole pass's by {err:.3g}")
        # traced with rows knowing different counts and K > 1, so neither is fixed to the trace
        torch.onnx.export(PickedTransformerGraph(model), sample(model, classes, 2, 3, 0), os.path.join(args.pack, PICKED_FILE),
                          opset_version=17, input_names=["tokens", "mask", "class_ids", "drop_class", "at"], output_names=["z"],
                          dynamic_axes={**{k: {0: "B"} for k in ["tokens", "mask", "class_ids", "drop_class"]},
                                        "at": {0: "B", 1: "K"}, "z": {0: "B", 1: "K"}})
    manifest["picked"] = {"file": PICKED_FILE}
    with open(os.path.join(args.pack, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"picked_transformer: {args.pack}/{PICKED_FILE} written (in PyTorch max |picked z - whole z| {err:.2g})")


if __name__ == "__main__":
    main()
