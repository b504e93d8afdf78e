"""Export an official MAR checkpoint and MAR's KL-16 VAE to a marspec model pack.

  /usr/bin/python3 scripts/packs/export_mar.py --ckpt pretrained/mar_huge/checkpoint-last.pth \
      --model mar_huge --vae pretrained/vae/kl16.ckpt --out packs/mar-huge \
      [--weights model_ema|model] [--class-names names.txt|torchvision] [--sampling-steps 100] \
      [--settings-of mar_base|mar_large|mar_huge|none] [--no-head-loop]

Writes manifest.json, transformer.onnx, head.onnx and decoder.onnx (docs/model-pack.md), the
cached transformer (docs/cache.md) and head_loop.onnx, the whole reverse diffusion in one call
(scripts/packs/fuse_head.py; --no-head-loop leaves it out).
The manifest carries MAR's published sampling settings for the model size (its "settings":
defaults and the presets paper, speed and unguided, each with its provenance), so a request to
`serve --target PACK` samples as the paper evaluates; --settings-of chooses another size's (a
checkpoint of your own with MAR-B's layout) or none.
`model_ema` (the weights MAR evaluates) is the default. Loading is strict: a missing or
unexpected key, or a shape that does not match --model, stops the export and names it.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib.graphs import HeadGraph, TransformerGraph, onnx_export
from lib import mar_official as mo
from packs import cached_transformer


def load_mar(path, preset, weights):
    cfg = mo.MAR_PRESETS[preset]
    ck = torch.load(path, map_location="cpu")
    if not isinstance(ck, dict) or weights not in ck:
        have = sorted(ck.keys()) if isinstance(ck, dict) else type(ck).__name__
        raise ValueError(f"{path}: no '{weights}' entry (has {have}); use --weights model or model_ema")
    model = mo.build_mar(cfg)
    mo.load_strict(model, ck[weights], f"{path} [{weights}] as {preset}")
    return model.eval(), cfg


def load_vae(path, preset):
    vae = mo.VAE(mo.VAE_PRESETS[preset])
    state = mo.vae_state(torch.load(path, map_location="cpu"), path)
    mo.load_strict(vae, state, f"{path} as VAE {preset}", ignore_prefixes=mo.VAE_UNUSED_PREFIXES)
    return vae.eval()


def torchvision_imagenet_names():
    """The 1000 ImageNet class names as torchvision lists them (models/_meta.py), read from the
    installed package's source without importing it (no compiled parts needed). A name that
    repeats (older lists had two cranes and two maillots) gets its class index appended:
    marspec resolves names case-insensitively and needs them unique."""
    import ast
    import importlib.util
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("--class-names torchvision: torchvision is not installed (apt-get install python3-torchvision, or pass a file)")
    meta = os.path.join(list(spec.submodule_search_locations)[0], "models", "_meta.py")
    with open(meta) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_IMAGENET_CATEGORIES" for t in node.targets):
            names = ast.literal_eval(node.value)
            break
    else:
        raise ValueError(f"--class-names torchvision: no _IMAGENET_CATEGORIES in {meta}")
    seen, out = set(), []
    for i, name in enumerate(names):
        if name.lower() in seen:
            name = f"{name} ({i})"
        seen.add(name.lower())
        out.append(name)
    return out, f"torchvision ({meta})"


def class_names(path, n):
    """Names from a file (one per line), torchvision's ImageNet list (path "torchvision"), else
    class_000.. placeholders."""
    if not path:
        return [f"class_{i:03d}" for i in range(n)], "placeholder"
    if path == "torchvision":
        names, source = torchvision_imagenet_names()
    else:
        with open(path) as f:
            names, source = [line.strip() for line in f if line.strip()], path
    if len(names) != n:
        raise ValueError(f"{path}: {len(names)} class names, the checkpoint has {n} classes")
    if len(set(n.lower() for n in names)) != len(names):
        raise ValueError(f"{path}: class names repeat (marspec resolves names case-insensitively)")
    return names, source


def sample_inputs(cfg, model):
    """Inputs that trace every path: two rows with different numbers of known tokens, CFG on one."""
    L, D = model.seq_len, model.token_dim
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(2, L, D, generator=g)
    mask = torch.ones(2, L)
    mask[0, : L // 3] = 0
    ids = torch.tensor([0, cfg["class_num"] - 1], dtype=torch.int64)
    drop = torch.tensor([0.0, 1.0])
    return tokens, mask, ids, drop


EXTERNAL_DATA = "transformer.onnx.data"  # the transformer's weights when its graph is over 2 GB


def export_transformer(model, cfg, out, external):
    """transformer.onnx, with its weights in transformer.onnx.data when torch had to put them
    outside the graph (over protobuf's 2 GB: MAR-H) or external is asked for (the test does,
    so the Go side's external-data path runs in CI). torch writes one file per weight; they are
    gathered into one file, which is what marspec looks for."""
    batch = {0: "B"}
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        graph = os.path.join(tmp, "transformer.onnx")
        onnx_export(TransformerGraph(model, compact=True), sample_inputs(cfg, model), graph,
                          opset_version=17, input_names=["tokens", "mask", "class_ids", "drop_class"],
                          output_names=["z"], dynamic_axes={k: batch for k in ["tokens", "mask", "class_ids", "drop_class", "z"]})
        dest = os.path.join(out, "transformer.onnx")
        if os.path.exists(os.path.join(out, EXTERNAL_DATA)):
            os.remove(os.path.join(out, EXTERNAL_DATA))
        if not external and os.listdir(tmp) == ["transformer.onnx"]:
            os.replace(graph, dest)
            return False
        try:
            import onnx  # only here: a graph under 2 GB needs no onnx package
        except ImportError:
            raise SystemExit(f"export_mar: the transformer's weights must go to {EXTERNAL_DATA} (the graph is over 2 GB), "
                             "which needs the onnx Python package (apt-get install python3-onnx, or pip install onnx)")
        proto = onnx.load(graph)  # reads torch's per-weight files
        onnx.save_model(proto, dest, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=EXTERNAL_DATA, size_threshold=0)
        return True


# MAR's published sampling settings per model size: the official README's evaluation commands
# (ImageNet 256x256, 50,000 images, 50 per class), guidance scale and the FID it reports. Every
# size evaluates with num_iter 256, 100 diffusion steps, the linear guidance schedule and
# temperature 1.0; the README suggests num_iter 64 for speed, and evaluates without guidance
# at cfg 1.0, temperature 0.95.
PUBLISHED = {"mar_base": {"label": "MAR-B", "cfg": 2.9, "fid": 2.31},
             "mar_large": {"label": "MAR-L", "cfg": 3.0, "fid": 1.78},
             "mar_huge": {"label": "MAR-H", "cfg": 3.2, "fid": 1.55}}
PAPER_NUM_ITER, SPEED_NUM_ITER, PAPER_STEPS = 256, 64, 100
UNGUIDED_TEMPERATURE = 0.95


def published_settings(size, seq_len, note=""):
    """The manifest's "settings" entry for MAR size `size` (a PUBLISHED key); `note` says how the
    pack relates to that size when it is not that checkpoint (e.g. random weights)."""
    if size not in PUBLISHED:
        raise ValueError(f"no published settings for {size!r} (allowed: {', '.join(sorted(PUBLISHED))})")
    if seq_len != PAPER_NUM_ITER:
        raise ValueError(f"MAR's published settings are for {PAPER_NUM_ITER} tokens (a 16x16 grid); this pack has {seq_len}")
    p = PUBLISHED[size]
    src = f"published: MAR official README, {p['label']} evaluation command"
    args = f"num_iter {PAPER_NUM_ITER}, num_sampling_steps {PAPER_STEPS}, cfg {p['cfg']}, cfg_schedule linear, temperature 1.0"
    tail = f" (FID {p['fid']} on ImageNet 256x256, 50,000 images){note}"
    guided = {"mode": "target", "steps": PAPER_STEPS, "sampler": "ddpm", "cfg": p["cfg"], "cfg_schedule": "linear",
              "temperature": 1.0}
    return {
        "defaults": {"num_iter": PAPER_NUM_ITER, "steps": PAPER_STEPS, "sampler": "ddpm", "cfg": p["cfg"],
                     "cfg_schedule": "linear", "temperature": 1.0, "provenance": f"{src}: {args}{tail}"},
        "default_preset": "paper",
        "evaluation_preset": "paper",
        "presets": {
            "paper": dict(guided, num_iter=PAPER_NUM_ITER,
                          about=f"{p['label']}'s evaluation setting: {PAPER_NUM_ITER} AR steps, ddpm in {PAPER_STEPS} steps, cfg {p['cfg']} linear, temperature 1.0",
                          provenance=f"{src}: {args}{tail}"),
            "speed": dict(guided, num_iter=SPEED_NUM_ITER,
                          about=f"{p['label']} with {SPEED_NUM_ITER} AR steps (MAR's suggestion for speed), otherwise as paper",
                          provenance=f"published: MAR official README, num_iter {SPEED_NUM_ITER} suggested for faster generation; the other settings as {p['label']}'s evaluation command{note}"),
            "unguided": {"mode": "target", "num_iter": PAPER_NUM_ITER, "steps": PAPER_STEPS, "sampler": "ddpm", "cfg": 1.0,
                         "cfg_schedule": "linear", "temperature": UNGUIDED_TEMPERATURE,
                         "about": f"{p['label']} without guidance: cfg 1.0, temperature {UNGUIDED_TEMPERATURE}, {PAPER_NUM_ITER} AR steps, ddpm in {PAPER_STEPS} steps",
                         "provenance": f"published: MAR official README, evaluation without classifier-free guidance: cfg 1.0, temperature {UNGUIDED_TEMPERATURE}{note}"},
        },
    }


def export(model, cfg, vae, out, name, sampling_steps, names, names_source, record, external=False, settings=None,
           head_loop=True):
    os.makedirs(out, exist_ok=True)
    L, D, W = model.seq_len, model.token_dim, model.class_emb.weight.shape[1]
    batch = {0: "B"}
    with torch.no_grad():
        external = export_transformer(model, cfg, out, external)
        n = {0: "N"}
        onnx_export(HeadGraph(model.diffloss.net), (torch.randn(3, D), torch.tensor([0.0, 500.0, 999.0]), torch.randn(3, W)),
                          os.path.join(out, "head.onnx"), opset_version=17, input_names=["x_t", "t", "z"],
                          output_names=["out"], dynamic_axes={k: n for k in ["x_t", "t", "z", "out"]})
        onnx_export(mo.DecoderGraph(vae, cfg), (torch.randn(1, L, D),), os.path.join(out, "decoder.onnx"),
                          opset_version=17, input_names=["tokens"], output_names=["image"],
                          dynamic_axes={"tokens": batch, "image": batch})
    grid = mo.grid_size(cfg)
    params = sum(p.numel() for p in model.parameters())
    manifest = {
        "format": "marspec-pack/1",
        "name": name,
        "image": {"height": cfg["img_size"], "width": cfg["img_size"], "channels": 3},
        # patch = image pixels per token side (VAE stride x MAR patch size)
        "tokenizer": {"kind": "vae_decoder", "patch": cfg["img_size"] // grid, "graph": "decoder.onnx",
                      "latent_scale": mo.LATENT_SCALE},
        "grid": {"height": grid, "width": grid},
        "token_dim": D,
        "width": W,
        "buffer_size": model.buffer_size,
        "classes": names,
        # MAR samples with 100 respaced steps and never clips x0 (latents are not bounded)
        "diffusion": {"schedule": "cosine", "training_steps": 1000, "sampling_steps": sampling_steps,
                      "variance": "learned_range", "clip_x0": False},
        "training": dict(record, architecture=cfg, parameters=params,
                         head_parameters=sum(p.numel() for p in model.diffloss.parameters()),
                         vae_parameters=sum(p.numel() for p in vae.parameters()), class_names=names_source),
    }
    if settings is not None:
        manifest["settings"] = settings
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    if external:
        print(f"note: {out}/transformer.onnx keeps its weights in {EXTERNAL_DATA}; keep the two together", file=sys.stderr)
    # the cached transformer, for caching across AR steps (docs/cache.md), its weights kept as the transformer's
    manifest["cache"] = cached_transformer.add_to_pack(model, out, external=external)
    if head_loop:  # the head's reverse diffusion in one call (mar.HeadLoop), built from head.onnx
        entry = fused_head_entry(out)
        if entry:
            manifest["head_loop"] = entry
    align_weights(out)
    return manifest


def align_weights(out):
    """The large graphs' weights into page-aligned files beside them, which ONNX Runtime maps
    instead of copying (scripts/packs/aligned_weights.py): MAR-B opens in about half the time.
    Without the onnx package the graphs stay whole, which marspec reads too."""
    try:
        from packs import aligned_weights
    except ImportError:
        print(f"note: {out}'s graphs keep their weights inside (slower to open): scripts/packs/aligned_weights.py {out} "
              "moves them out; it needs the onnx Python package", file=sys.stderr)
        return
    aligned_weights.align_pack(out)


def fused_head_entry(out):
    """Adds head_loop.onnx to the pack, or, without the onnx package (which a graph under 2 GB
    otherwise does not need, and a GPU machine's PyTorch may lack), says so and leaves it out:
    the pack is whole without it, its head runs one call per step."""
    try:
        from packs import fuse_head
    except ImportError:
        print(f"note: {out} has no head_loop.onnx (the head's reverse diffusion in one call): that needs the onnx "
              "Python package (apt-get install python3-onnx, or pip install onnx), then scripts/packs/fuse_head.py "
              f"{out} adds it", file=sys.stderr)
        return None
    entry, _, _ = fuse_head.add_to_pack(out)
    return entry


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True, help="MAR checkpoint-last.pth")
    ap.add_argument("--model", required=True, choices=sorted(mo.MAR_PRESETS))
    ap.add_argument("--weights", default="model_ema", choices=["model_ema", "model"])
    ap.add_argument("--vae", required=True, help="KL-16 VAE checkpoint (kl16.ckpt)")
    ap.add_argument("--vae-config", default="kl16", choices=sorted(mo.VAE_PRESETS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", help="pack name (default: the --model name)")
    ap.add_argument("--class-names", help="file with one class name per line, or torchvision: the ImageNet names of the "
                                          "installed torchvision (default class_000..)")
    ap.add_argument("--sampling-steps", type=int, default=100)
    ap.add_argument("--settings-of", help="whose published sampling settings the manifest carries: "
                    + ", ".join(sorted(PUBLISHED)) + ", or none (default: --model's, none for sizes MAR did not publish)")
    ap.add_argument("--external-data", action="store_true",
                    help="always keep the transformer's weights in transformer.onnx.data (automatic over 2 GB)")
    ap.add_argument("--no-head-loop", action="store_true",
                    help="leave out head_loop.onnx (the reverse diffusion in one call; scripts/packs/fuse_head.py adds it later)")
    args = ap.parse_args(argv)
    try:
        model, cfg = load_mar(args.ckpt, args.model, args.weights)
        vae = load_vae(args.vae, args.vae_config)
        names, source = class_names(args.class_names, cfg["class_num"])
        size = args.settings_of or (args.model if args.model in PUBLISHED else "none")
        note = "" if size == args.model else f"; applied to a {args.model} checkpoint by --settings-of"
        settings = None if size == "none" else published_settings(size, mo.grid_size(cfg) ** 2, note)
    except (ValueError, OSError) as e:
        sys.exit(f"export_mar: {e}")
    record = {"checkpoint": os.path.abspath(args.ckpt), "weights": args.weights, "model": args.model,
              "vae": os.path.abspath(args.vae), "vae_config": args.vae_config}
    m = export(model, cfg, vae, args.out, args.name or args.model.replace("_", "-"), args.sampling_steps,
               names, source, record, external=args.external_data, settings=settings, head_loop=not args.no_head_loop)
    print(json.dumps({k: m["training"][k] for k in ("model", "weights", "parameters", "class_names")}))


if __name__ == "__main__":
    main()
