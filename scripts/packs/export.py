"""Export a MAR-style checkpoint (EMA weights) to a marspec model pack.

  /usr/bin/python3 scripts/packs/export.py --ckpt runs/target/checkpoint-last.pth --name fmnist-target \
      --out models/target [--sampling-steps 50]
Writes manifest.json, transformer.onnx and head.onnx (format: docs/model-pack.md).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import fmnist
from lib.graphs import HeadGraph, TransformerGraph
from lib.marmodel import MAR


def training_data(args):
    """What the checkpoint was trained on: Fashion-MNIST, or generated images (train.py --data)."""
    if args.get("data"):
        return "generated images: " + args["data"]
    return "fashion-mnist train (60k)"


def load_model(ckpt_path):
    ck = torch.load(ckpt_path, map_location="cpu")
    cfg = ck["args"]["preset_config"]
    model = MAR(seq_len=49, token_dim=16, **cfg)
    model.load_state_dict(ck["model_ema"])
    model.eval()
    return model, ck


def export(model, ck, name, out, sampling_steps):
    os.makedirs(out, exist_ok=True)
    cfg = ck["args"]["preset_config"]
    b = 2
    tokens = torch.randn(b, 49, 16)
    mask = torch.ones(b, 49)
    mask[0, :10] = 0
    ids = torch.tensor([1, 2], dtype=torch.int64)
    drop = torch.zeros(b)
    with torch.no_grad():
        torch.onnx.export(TransformerGraph(model, compact=True), (tokens, mask, ids, drop),
                          os.path.join(out, "transformer.onnx"), opset_version=17,
                          input_names=["tokens", "mask", "class_ids", "drop_class"], output_names=["z"],
                          dynamic_axes={"tokens": {0: "B"}, "mask": {0: "B"}, "class_ids": {0: "B"},
                                        "drop_class": {0: "B"}, "z": {0: "B"}})
        n = 3
        torch.onnx.export(HeadGraph(model.diffloss.net),
                          (torch.randn(n, 16), torch.tensor([5.0, 500.0, 999.0]), torch.randn(n, cfg["width"])),
                          os.path.join(out, "head.onnx"), opset_version=17,
                          input_names=["x_t", "t", "z"], output_names=["out"],
                          dynamic_axes={"x_t": {0: "N"}, "t": {0: "N"}, "z": {0: "N"}, "out": {0: "N"}})
    params = sum(p.numel() for p in model.parameters())
    head_params = sum(p.numel() for p in model.diffloss.parameters())
    manifest = {
        "format": "marspec-pack/1",
        "name": name,
        "image": {"height": 28, "width": 28, "channels": 1},
        "tokenizer": {"kind": "space_to_depth", "patch": 4, "scale": "minus1_1"},
        "grid": {"height": 7, "width": 7},
        "token_dim": 16,
        "width": cfg["width"],
        "buffer_size": model.buffer_size,
        "classes": fmnist.CLASSES,
        "diffusion": {"schedule": "cosine", "training_steps": 1000, "sampling_steps": sampling_steps,
                      "variance": "learned_range", "clip_x0": True},
        "training": {"dataset": training_data(ck["args"]), "preset": ck["args"]["preset"],
                     "config": cfg, "parameters": params, "head_parameters": head_params,
                     "steps": ck["step"], "images_seen": ck["images"],
                     "minutes": round(ck["seconds"] / 60, 1), "batch": ck["args"]["batch"],
                     "lr": ck["args"]["lr"], "ema": ck["args"]["ema"], "label_drop": 0.1},
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sampling-steps", type=int, default=50)
    args = ap.parse_args()
    model, ck = load_model(args.ckpt)
    m = export(model, ck, args.name, args.out, args.sampling_steps)
    print(json.dumps(m["training"]))


if __name__ == "__main__":
    main()
