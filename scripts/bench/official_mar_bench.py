"""Images/s of the official PyTorch MAR code, on the same weights as a marspec pack: the
reference scripts/gpu/gpu_bench.sh sets marspec's GPU numbers against.

  /usr/bin/python3 scripts/bench/official_mar_bench.py --code /path/to/mar --model mar_huge \
      --pack out/packs/mar-huge --batch 32 --images 64 --num-iter 64

--code is a copy of the official repository (github.com/LTH14/mar, fetched by hand, never
committed). --pack is a folder from `make_random_packs.py --checkpoint` (checkpoint-last.pth and
vae.ckpt beside the pack). The model is the official MAR class at the preset's sizes, loaded
strictly from the pack's checkpoint (so this also checks that marspec's parameter names are the
official ones); images are sampled with its sample_tokens and decoded with its VAE decoder.
Where timm or tqdm is not installed, a stand-in is used and named in the output: MAR takes only
timm's transformer Block (the pre-norm block, same parameter names) and tqdm's progress bar.
--cpu runs on the CPU by making .cuda() a no-op: the reference for marspec's CPU numbers at real
size (scripts/bench/realsize_cpu_bench.py alternates the two; set OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS to --threads before starting it, as that script does). --threads sets
PyTorch's intra-op threads. Besides images/s it reports the time spent in each part of the
official sampler (encoder + decoder = one transformer pass, the head's p_sample_loop, the VAE
decode), per call, and the time to build the model and load the checkpoints (start-up).
--autocast bf16 runs sampling and decoding under torch.autocast in bfloat16 (on the CPU with
--cpu), the precision MAR itself trains in and the strongest setting a MAR user would time;
where this torch cannot autocast that device to bfloat16 the run prints {"skipped": reason}.
--warmup-num-iter sets the AR steps of the untimed warm-up images (default: --num-iter), so a
GPU run can warm every kernel without paying a whole generation first.
Prints one JSON object.
"""
import argparse
import contextlib
import importlib
import json
import os
import sys
import time
import types
from functools import partial

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import mar_official as mo
from lib import marmodel


def install_stand_ins():
    """timm's Block and tqdm, only where the real ones are missing; returns their names."""
    used = []
    try:
        importlib.import_module("timm.models.vision_transformer")
    except ImportError:
        class Block(marmodel.Block):  # what MAR builds: Block(dim, heads, mlp_ratio, qkv_bias=True, ...)
            def __init__(self, dim, num_heads, mlp_ratio=4.0, qkv_bias=True, **_dropouts_and_norm):
                super().__init__(dim, num_heads, mlp_ratio)

        vit = types.ModuleType("timm.models.vision_transformer")
        vit.Block = Block
        timm = types.ModuleType("timm")
        models = types.ModuleType("timm.models")
        timm.models, models.vision_transformer = models, vit
        sys.modules.update({"timm": timm, "timm.models": models, "timm.models.vision_transformer": vit})
        used.append("timm.Block")
    try:
        importlib.import_module("tqdm")
    except ImportError:
        tq = types.ModuleType("tqdm")
        tq.tqdm = lambda it, *a, **k: it
        sys.modules["tqdm"] = tq
        used.append("tqdm")
    return used


class PartTimes:
    """Seconds and calls per part of the official sampler, filled by the wrappers time_parts installs."""

    def __init__(self, synchronize):
        self.sync, self.seconds, self.calls = synchronize, {}, {}

    def wrap(self, name, fn):
        def timed(*a, **k):
            self.sync()
            start = time.perf_counter()
            out = fn(*a, **k)
            self.sync()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.calls[name] = self.calls.get(name, 0) + 1
            return out
        return timed

    def clear(self):
        self.seconds.clear()
        self.calls.clear()

    def report(self):
        return {n: {"seconds": s, "calls": self.calls[n], "ms_per_call": 1000 * s / self.calls[n]}
                for n, s in self.seconds.items()}


def official_class(official_mar, cfg, steps=None):
    """The official MAR class at the sizes of cfg (a mar_official.MAR_PRESETS entry: equal encoder
    and decoder widths and depths, as every official preset has); steps None keeps its default."""
    extra = {} if steps is None else {"num_sampling_steps": str(steps)}
    return official_mar.MAR(img_size=cfg["img_size"], vae_stride=cfg["vae_stride"], patch_size=cfg["patch_size"],
                            encoder_embed_dim=cfg["width"], encoder_depth=cfg["depth"], encoder_num_heads=cfg["heads"],
                            decoder_embed_dim=cfg["width"], decoder_depth=cfg["depth"], decoder_num_heads=cfg["heads"],
                            mlp_ratio=4, norm_layer=partial(nn.LayerNorm, eps=1e-6), vae_embed_dim=cfg["vae_embed_dim"],
                            class_num=cfg["class_num"], buffer_size=cfg["buffer_size"], diffloss_d=cfg["head_depth"],
                            diffloss_w=cfg["head_width"], **extra)


def mar_model(official_mar, official_vae, args):
    """The official MAR class at a preset's sizes and its KL-16 decoder, from the pack's
    official-layout checkpoints (make_random_packs.py --checkpoint)."""
    cfg, vcfg = mo.MAR_PRESETS[args.model], mo.VAE_PRESETS[args.vae_config]
    model = official_class(official_mar, cfg, args.steps)
    ck = torch.load(os.path.join(args.pack, "checkpoint-last.pth"), map_location="cpu")
    model.load_state_dict(ck["model_ema"], strict=True)  # marspec's names are the official ones
    decoder = official_vae.Decoder(ch=vcfg["ch"], ch_mult=vcfg["ch_mult"], num_res_blocks=vcfg["num_res_blocks"],
                                   z_channels=vcfg["z_channels"], out_ch=vcfg["out_ch"], attn_resolutions=vcfg["attn_resolutions"],
                                   resolution=cfg["img_size"])
    post = nn.Conv2d(vcfg["z_channels"], vcfg["z_channels"], 1)
    vs = torch.load(os.path.join(args.pack, "vae.ckpt"), map_location="cpu")["model"]
    decoder.load_state_dict({k[len("decoder."):]: v for k, v in vs.items() if k.startswith("decoder.")}, strict=True)
    post.load_state_dict({k[len("post_quant_conv."):]: v for k, v in vs.items() if k.startswith("post_quant_conv.")}, strict=True)
    return model, decoder, post


def toy_model(official_mar, args):
    """The official MAR class at the sizes of a marspec pack with fixed patch tokens (the embedded
    Fashion-MNIST target), loaded strictly from --checkpoint (scripts/packs/ckpt_from_pack.py rebuilds
    one from the pack's graphs). Tokens are pixels, so decoding is the official unpatchify that
    sample_tokens already ends with; nothing else is timed as the decode."""
    with open(os.path.join(args.pack, "manifest.json")) as f:
        man = json.load(f)
    if man["tokenizer"]["kind"] != "space_to_depth":
        sys.exit(f"official_mar_bench: --model pack takes packs with space_to_depth tokens; {args.pack} has "
                 f"{man['tokenizer']['kind']} (use --model mar_base etc. with its checkpoint)")
    c, patch = man["training"]["config"], man["tokenizer"]["patch"]
    if c["enc_depth"] != c["dec_depth"]:
        sys.exit(f"official_mar_bench: the official MAR class needs equal encoder and decoder depths, {args.pack} has {c}")
    sizes = dict(img_size=man["image"]["height"], vae_stride=patch, patch_size=1, width=c["width"], depth=c["enc_depth"],
                 heads=c["heads"], vae_embed_dim=man["token_dim"], class_num=len(man["classes"]),
                 buffer_size=man["buffer_size"], head_depth=c["head_depth"], head_width=c["head_width"])
    model = official_class(official_mar, sizes, args.steps)
    ck = torch.load(args.checkpoint, map_location="cpu")
    model.load_state_dict(ck["model_ema"], strict=True)
    return model, (lambda tokens: tokens), len(man["classes"])


def time_parts(model, decoder, cpu):
    """Times the official model's own methods in place: a transformer pass is one encoder plus one
    decoder call, a head call is one whole p_sample_loop (all diffusion steps of one AR step)."""
    parts = PartTimes((lambda: None) if cpu else torch.cuda.synchronize)
    model.forward_mae_encoder = parts.wrap("encoder", model.forward_mae_encoder)
    model.forward_mae_decoder = parts.wrap("decoder", model.forward_mae_decoder)
    model.diffloss.sample = parts.wrap("head_loop", model.diffloss.sample)
    if decoder is not None:
        decoder.forward = parts.wrap("vae_decode", decoder.forward)
    return parts


def autocast_unsupported(device):
    """Why torch.autocast to bfloat16 cannot run MAR on device here, or "" when it can. Probed
    on what every MAR block does, a Linear then a LayerNorm with float32 weights: the Linear
    must come out in bfloat16 and the LayerNorm must accept it (torch 1.13's CPU autocast
    leaves layer_norm alone, which then refuses a bfloat16 input with float32 weights)."""
    try:
        layer, norm = nn.Linear(4, 4).to(device), nn.LayerNorm(4).to(device)
        with torch.no_grad(), torch.autocast(device_type=device, dtype=torch.bfloat16):
            out = layer(torch.zeros(2, 4, device=device))
            kind = out.dtype
            norm(out)
    except Exception as e:  # noqa: BLE001: any refusal is the reason to report
        return f"torch {torch.__version__} cannot run MAR under bfloat16 autocast on {device}: " + " ".join(str(e).split())[:200]
    if kind != torch.bfloat16:
        return f"torch {torch.__version__} autocast on {device} left a Linear in {kind}, not bfloat16"
    return ""


def precision_context(autocast, device):
    """The autocast context of --autocast (a no-op context for off)."""
    if autocast == "off":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=torch.bfloat16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", required=True, help="folder of the official MAR repository")
    ap.add_argument("--model", required=True, choices=sorted(mo.MAR_PRESETS) + ["pack"],
                    help="an official preset, or pack: the sizes of --pack's manifest (a space_to_depth pack such as "
                         "models/target, with --checkpoint)")
    ap.add_argument("--checkpoint", help="--model pack: the checkpoint scripts/packs/ckpt_from_pack.py rebuilt from the pack")
    ap.add_argument("--vae-config", default="kl16", choices=sorted(mo.VAE_PRESETS))
    ap.add_argument("--pack", required=True, help="pack folder holding checkpoint-last.pth and vae.ckpt (or, with "
                    "--model pack, a marspec pack with fixed patch tokens)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--num-iter", type=int, default=64, help="AR steps (MAR's default 64; L = one token per step)")
    ap.add_argument("--steps", type=int, default=100, help="diffusion sampling steps")
    ap.add_argument("--cfg", type=float, default=1.0)
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (.cuda() becomes a no-op)")
    ap.add_argument("--warmup", type=int, default=2, help="images generated (untimed) before the timed ones")
    ap.add_argument("--warmup-num-iter", type=int, default=0, help="AR steps of the warm-up images (0 = --num-iter)")
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: sample and decode under torch.autocast(dtype=torch.bfloat16) on the run's device")
    ap.add_argument("--threads", type=int, default=0, help="PyTorch intra-op threads (0 = its default)")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.code, "models", "mar.py")):
        print(json.dumps({"skipped": f"{args.code}/models/mar.py not found: fetch the official MAR code first"}))
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    stand_ins = install_stand_ins()
    if args.cpu:
        torch.Tensor.cuda = lambda self, *a, **k: self
        nn.Module.cuda = lambda self, *a, **k: self
    elif not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device (use --cpu for a smoke test)"}))
        return
    if args.autocast != "off":
        reason = autocast_unsupported("cpu" if args.cpu else "cuda")
        if reason:
            print(json.dumps({"skipped": reason}))
            return
    sys.path.insert(0, os.path.abspath(args.code))
    from models import mar as official_mar  # noqa: E402  (the fetched copy)
    from models import vae as official_vae  # noqa: E402

    load_start = time.perf_counter()
    if args.model == "pack":
        model, decode, classes = toy_model(official_mar, args)
        decoder = post = None
    else:
        model, decoder, post = mar_model(official_mar, official_vae, args)
        decode, classes = (lambda tokens: decoder(post(tokens / mo.LATENT_SCALE))), mo.MAR_PRESETS[args.model]["class_num"]
    device = "cpu" if args.cpu else "cuda"
    model = model.to(device).eval()
    if decoder is not None:
        decoder, post = decoder.to(device).eval(), post.to(device).eval()
    load_seconds = time.perf_counter() - load_start
    parts = time_parts(model, decoder, args.cpu)

    def batch_images(n, seed, num_iter=args.num_iter):
        torch.manual_seed(seed)
        labels = torch.arange(n, device=device) % classes
        return decode(model.sample_tokens(n, num_iter=num_iter, cfg=args.cfg, labels=labels))

    with torch.no_grad(), precision_context(args.autocast, device):
        if args.warmup > 0:
            # warm-up: kernels, allocator (and autocast's weight casts)
            batch_images(min(args.batch, args.warmup), 0, args.warmup_num_iter or args.num_iter)
        parts.clear()
        if not args.cpu:
            torch.cuda.synchronize()
        start, done = time.perf_counter(), 0
        while done < args.images:
            n = min(args.batch, args.images - done)
            batch_images(n, 1 + done)
            done += n
        if not args.cpu:
            torch.cuda.synchronize()
        sec = time.perf_counter() - start
    print(json.dumps({"model": args.model, "batch": args.batch, "images": done, "num_iter": args.num_iter,
                      "steps": args.steps, "cfg": args.cfg, "autocast": args.autocast, "seconds": sec, "images_per_second": done / sec,
                      "threads": torch.get_num_threads(), "load_seconds": load_seconds, "parts": parts.report(),
                      "device": torch.cuda.get_device_name(0) if not args.cpu else "cpu", "torch": torch.__version__,
                      "stand_ins": stand_ins}))


if __name__ == "__main__":
    main()
