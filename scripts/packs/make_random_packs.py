"""Random-weight packs of the official MAR architectures, for timing only (never committed).

  /usr/bin/python3 scripts/packs/make_random_packs.py --models mar_base,mar_huge --out out/packs
  /usr/bin/python3 scripts/packs/make_random_packs.py --models test_tiny,test_small --vae test_tiny --out out/packs
  /usr/bin/python3 scripts/packs/make_random_packs.py --models mar_draft_small --out out/packs      # a draft for mar_base
  /usr/bin/python3 scripts/packs/make_random_packs.py --models ci_target,ci_draft --vae ci_kl16 --out DIR   # MAR-B's layout, a few MB
  /usr/bin/python3 scripts/packs/make_random_packs.py --models ci_target --vae ci_kl16 --settings-of mar_huge --out DIR  # with MAR-H's settings

Each pack is what scripts/packs/export_mar.py makes from a real checkpoint (transformer, head,
fused head loop, KL-16 VAE decoder, 1000 placeholder class names), with random weights: the compute per pass is
the real one, the images and the draft's acceptance are not. Packs land in OUT/<model>
(`out/` is git-ignored); an existing pack is kept unless --force.
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


# packs of MAR-B's token layout that are not MAR-B carry MAR-B's published settings
SETTINGS_OF = {"ci_target": "mar_base", "ci_draft": "mar_base", "mar_draft_small": "mar_base"}


def randomise(model, gen):
    """Weights at the scale a trained model has (LayerNorm gains 1, small linear weights), and
    the head's variance half kept near [-1, 1] so sampling stays finite (docs/gpu.md)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln" in name) and name.endswith("weight"):
                p.fill_(1.0)
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * (1.0 / p.shape[-1]) ** 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        final = model.diffloss.net.final_layer.linear
        half = final.out_features // 2
        final.weight[half:].mul_(0.02)
        final.bias[half:].mul_(0.02)


def make(model_name, vae_name, out, seed, steps, force, checkpoint=False, settings_of=None, head_loop=True):
    dest = os.path.join(out, model_name.replace("_", "-") + (f"-as-{settings_of.replace('_', '-')}" if settings_of else ""))
    complete = os.path.exists(os.path.join(dest, "manifest.json")) and (
        not checkpoint or os.path.exists(os.path.join(dest, "checkpoint-last.pth")))
    if complete and not force:
        print(f"make_random_packs: {dest} exists (--force remakes it)", file=sys.stderr)
        return dest
    start = time.time()
    gen = torch.Generator().manual_seed(seed)
    cfg = mo.MAR_PRESETS[model_name]
    vcfg = mo.VAE_PRESETS[vae_name]
    if 2 ** (len(vcfg["ch_mult"]) - 1) != cfg["vae_stride"] or vcfg["z_channels"] != cfg["vae_embed_dim"]:
        sys.exit(f"make_random_packs: VAE {vae_name} (stride {2 ** (len(vcfg['ch_mult']) - 1)}, {vcfg['z_channels']} channels) "
                 f"does not fit {model_name} (stride {cfg['vae_stride']}, {cfg['vae_embed_dim']} channels); use --vae kl16 "
                 "(or ci_kl16) for mar_base/large/huge/draft_small and ci_target/ci_draft, test_tiny for test_tiny/test_small")
    model = mo.build_mar(cfg)
    randomise(model, gen)
    vae = mo.VAE(mo.VAE_PRESETS[vae_name])
    with torch.no_grad():
        for p in vae.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * (1.0 / p[0].numel()) ** 0.5)
    names = [f"class_{i:03d}" for i in range(cfg["class_num"])]
    record = {"checkpoint": "random weights (scripts/packs/make_random_packs.py)", "weights": "random", "model": model_name,
              "vae": "random weights", "vae_config": vae_name, "seed": seed}
    # the sizes MAR published get their settings; packs of MAR-B's token layout (the CI packs,
    # the small draft) get MAR-B's, saying so; the test sizes (16 tokens) none
    size = settings_of or (model_name if model_name in export_mar.PUBLISHED else SETTINGS_OF.get(model_name))
    settings = None
    if size:
        note = "; random weights (scripts/packs/make_random_packs.py)" + ("" if size == model_name else f", {model_name} in {size}'s token layout")
        settings = export_mar.published_settings(size, mo.grid_size(cfg) ** 2, note)
    m = export_mar.export(model, cfg, vae, dest, f"{model_name.replace('_', '-')}-random", steps, names, "placeholder", record,
                          settings=settings, head_loop=head_loop)
    if checkpoint:  # the same weights in the official layout, for the official code's timing
        torch.save({"model_ema": model.state_dict(), "model": model.state_dict()}, os.path.join(dest, "checkpoint-last.pth"))
        torch.save({"model": {**{"post_quant_conv." + k: v for k, v in vae.post_quant_conv.state_dict().items()},
                              **{"decoder." + k: v for k, v in vae.decoder.state_dict().items()}}},
                   os.path.join(dest, "vae.ckpt"))
    print(json.dumps({"pack": dest, "parameters": m["training"]["parameters"], "seconds": round(time.time() - start, 1)}))
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mar_base,mar_huge", help="comma-separated: " + ", ".join(sorted(mo.MAR_PRESETS)))
    ap.add_argument("--vae", default="kl16", choices=sorted(mo.VAE_PRESETS))
    ap.add_argument("--out", default="out/packs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sampling-steps", type=int, default=100)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--settings-of", choices=sorted(export_mar.PUBLISHED),
                    help="give the packs this size's published settings (in OUT/<model>-as-<size>): the CI packs in MAR-L's or MAR-H's")
    ap.add_argument("--checkpoint", action="store_true",
                    help="also save the weights in the official layout (checkpoint-last.pth, vae.ckpt) in the pack folder")
    ap.add_argument("--no-head-loop", action="store_true",
                    help="leave out head_loop.onnx, the head's reverse diffusion in one call (export_mar.py's --no-head-loop)")
    args = ap.parse_args()
    for i, name in enumerate(args.models.split(",")):
        if name not in mo.MAR_PRESETS:
            sys.exit(f"make_random_packs: model {name!r} unknown (allowed: {', '.join(sorted(mo.MAR_PRESETS))})")
        make(name, args.vae, args.out, args.seed + i, args.sampling_steps, args.force, args.checkpoint, args.settings_of,
             not args.no_head_loop)


if __name__ == "__main__":
    main()
