"""Rebuild a PyTorch MAR checkpoint from a pack's ONNX graphs, for packs whose checkpoint is gone.

  /usr/bin/python3 scripts/packs/ckpt_from_pack.py --pack models/target \
      --out runs/target-rebuilt/checkpoint-last.pth [--fixture mar/testdata/parity_target.json]

The transformer graph keeps most parameters under their names (prefix `mar.`), but torch.onnx
stores every Linear weight transposed as an anonymous `onnx::MatMul_NNN` input of a MatMul node
named after the module (`/encoder_blocks.0/attn/qkv/MatMul`); the head graph (prefix `net.`)
keeps its Linear weights as named Gemm inputs. The rebuilt model is loaded strictly and checked
against the parity fixture (transformer z and head output within --tol); any mismatch exits
non-zero. The checkpoint has export.py's layout, so export.load_model reads it.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import mar_official as mo
from lib.marmodel import MAR


def initializers(g):
    """A graph's initializers by name, with the names torch.onnx folded into one tensor (equal
    weights, e.g. every LayerNorm gain of a random pack is 1) restored from their Identity nodes."""
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for node in g.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            inits.setdefault(node.output[0], inits[node.input[0]])
    return inits


def transformer_weights(path):
    """State-dict entries of the MAR transformer (everything but diffloss) from transformer.onnx."""
    g = onnx.load(path).graph
    inits = initializers(g)
    sd = {}
    for name, arr in inits.items():
        if name.startswith("mar."):
            sd[name[len("mar."):]] = arr
    for node in g.node:
        if node.op_type != "MatMul" or not node.name.endswith("/MatMul"):
            continue
        w = node.input[1]
        if w not in inits:  # attention's activation-by-activation MatMuls
            continue
        module = node.name[1:-len("/MatMul")].replace("/", ".")
        key = module + ".weight"
        if key in sd:
            raise ValueError(f"{path}: two MatMul weights for {key}")
        sd[key] = inits[w].T  # MatMul computes x @ W^T of torch's [out, in] weight
    return sd


def head_weights(path):
    """State-dict entries of diffloss.net from head.onnx (Gemm keeps torch's [out, in] layout)."""
    g = onnx.load(path).graph
    for node in g.node:
        if node.op_type == "Gemm":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if attrs.get("transB", 0) != 1 or attrs.get("transA", 0) != 0:
                raise ValueError(f"{path}: Gemm {node.name} has {attrs}, want transB=1, transA=0")
    sd = {}
    for name, arr in initializers(g).items():
        if not name.startswith("net."):
            raise ValueError(f"{path}: unexpected initializer {name}")
        sd["diffloss." + name] = arr
    return sd


def rebuild(pack):
    with open(os.path.join(pack, "manifest.json")) as f:
        manifest = json.load(f)
    tr = manifest["training"]
    if "architecture" in tr:  # a pack of an official size (scripts/packs/export_mar.py)
        cfg = tr["architecture"]
        model = mo.build_mar(cfg)
    else:  # a pack trained here (scripts/packs/export.py)
        cfg = tr["config"]
        model = MAR(seq_len=manifest["grid"]["height"] * manifest["grid"]["width"],
                    token_dim=manifest["token_dim"], buffer_size=manifest["buffer_size"],
                    num_classes=len(manifest["classes"]), **cfg)
    sd = transformer_weights(os.path.join(pack, "transformer.onnx"))
    sd.update(head_weights(os.path.join(pack, "head.onnx")))
    want = model.state_dict()
    for k, v in sd.items():
        if k not in want:
            raise ValueError(f"pack parameter {k} has no place in MAR({cfg})")
        if tuple(v.shape) != tuple(want[k].shape):
            raise ValueError(f"pack parameter {k}: shape {v.shape}, MAR wants {tuple(want[k].shape)}")
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in sd.items()}, strict=True)
    model.eval()
    return model, manifest


def verify(model, fixture_path, tol):
    """Max abs differences of transformer z and head out against the parity fixture."""
    with open(fixture_path) as f:
        fx = json.load(f)
    t = fx["transformer"]
    b, L, D, W = t["batch"], fx["seq_len"], fx["token_dim"], fx["width"]
    with torch.no_grad():
        z = model.forward_keep(torch.tensor(t["tokens"]).reshape(b, L, D),
                               torch.tensor(t["mask"]).reshape(b, L),
                               torch.tensor(t["class_ids"], dtype=torch.int64),
                               torch.tensor(t["drop_class"]))
        dz = (z.reshape(-1) - torch.tensor(t["z"])).abs().max().item()
        h = fx["head"]
        n = h["n"]
        out = model.diffloss.net(torch.tensor(h["x_t"]).reshape(n, D), torch.tensor(h["t"]),
                                 torch.tensor(h["z"]).reshape(n, W))
        dh = (out.reshape(-1) - torch.tensor(h["out"])).abs().max().item()
    return dz, dh


def rebuild_checked(pack, fixture, tol, tool):
    """rebuild(pack), held to the parity fixture when one is given: a pack tool that re-exports
    a graph from the pack's own weights stops (naming itself) when they miss it."""
    model, manifest = rebuild(pack)
    if fixture:
        dz, dh = verify(model, fixture, tol)
        if not (dz <= tol and dh <= tol):
            raise SystemExit(f"{tool}: rebuilt weights miss {fixture}: z {dz:.3g}, head {dh:.3g}")
    return model, manifest


def write_parity(model, path, seed=0):
    """The rebuilt model's transformer z and head output on random inputs (rows with different
    numbers of known tokens, one with the class dropped), in the parity fixture's layout, for a
    Go test to compare with the pack's graphs under ONNX Runtime (a pack without a fixture of
    its own: scripts/tests/distill_head_pack_test.go)."""
    gen = torch.Generator().manual_seed(seed)
    b, L, D = 2, model.seq_len, model.token_dim
    W = model.class_emb.weight.shape[1]
    tokens = torch.randn(b, L, D, generator=gen)
    mask = torch.ones(b, L)
    mask[0, : L // 3] = 0
    mask[1, : 2 * L // 3] = 0
    ids = torch.tensor([1, model.class_emb.weight.shape[0] - 1])
    drop = torch.tensor([0.0, 1.0])
    n = 3
    x_t, t, zh = torch.randn(n, D, generator=gen), torch.tensor([5.0, 500.0, 999.0]), torch.randn(n, W, generator=gen)
    with torch.no_grad():
        z = model.forward_keep(tokens, mask, ids, drop)
        out = model.diffloss.net(x_t, t, zh)
    fx = dict(seq_len=L, token_dim=D, width=W,
              transformer=dict(batch=b, tokens=tokens.flatten().tolist(), mask=mask.flatten().tolist(),
                               class_ids=ids.tolist(), drop_class=drop.tolist(), z=z.flatten().tolist()),
              head=dict(n=n, x_t=x_t.flatten().tolist(), t=t.tolist(), z=zh.flatten().tolist(),
                        out=out.flatten().tolist()))
    with open(path, "w") as f:
        json.dump(fx, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pack", required=True)
    ap.add_argument("--out")
    ap.add_argument("--fixture", default="mar/testdata/parity_target.json")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--write-parity", help="write the rebuilt model's outputs on random inputs here (no checkpoint)")
    args = ap.parse_args()
    model, manifest = rebuild(args.pack)
    if args.write_parity:
        write_parity(model, args.write_parity)
        print(f"wrote {args.write_parity}")
        return
    if not args.out:
        ap.error("--out is required (or --write-parity)")
    dz, dh = verify(model, args.fixture, args.tol)
    print(f"parity vs {args.fixture}: transformer z max|diff| {dz:.3g}, head out max|diff| {dh:.3g}")
    if not (dz <= args.tol and dh <= args.tol):
        sys.exit(f"rebuilt model does not reproduce {args.fixture} within {args.tol}: "
                 f"z {dz:.3g}, head {dh:.3g}")
    tr = manifest["training"]
    sd = model.state_dict()
    ck = dict(model=sd, model_ema=sd,
              args=dict(preset=tr.get("preset", "rebuilt"), preset_config=tr["config"],
                        batch=tr.get("batch"), lr=tr.get("lr"), ema=tr.get("ema"),
                        rebuilt_from=args.pack),
              step=tr.get("steps", 0), images=tr.get("images_seen", 0),
              seconds=tr.get("minutes", 0) * 60, params=tr.get("parameters"))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    torch.save(ck, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
