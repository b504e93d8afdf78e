"""The official MAR architectures (mar_base / mar_large / mar_huge) and MAR's KL-16 VAE decoder,
with the parameter names of the official checkpoints, plus strict checkpoint loading.

The transformer and diffusion head are marmodel.MAR (written here, already named as MAR names
its parameters); this module adds the official sizes, the VAE decoder (an LDM-style
autoencoder's decoder half, written from the published architecture) and loaders that refuse
a checkpoint whose keys or shapes do not match, naming them.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.marmodel import MAR

# Geometry shared by the official ImageNet-256 models: 256x256 images, a VAE of stride 16 with
# 16 latent channels, patch size 1 -> a 16x16 grid of 16-dim tokens, 64 buffer slots holding
# the class embedding, 1000 classes. Sizes per model: width, depth (encoder = decoder), heads,
# diffusion head width x depth (MAR's diffloss_w, diffloss_d).
_IMAGENET = dict(img_size=256, vae_stride=16, patch_size=1, vae_embed_dim=16, buffer_size=64, class_num=1000)
MAR_PRESETS = {
    "mar_base": dict(_IMAGENET, width=768, depth=12, heads=12, head_width=1024, head_depth=6),
    "mar_large": dict(_IMAGENET, width=1024, depth=16, heads=16, head_width=1280, head_depth=8),
    "mar_huge": dict(_IMAGENET, width=1280, depth=20, heads=16, head_width=1536, head_depth=12),
    # Test size (scripts/tests/test_export_mar.py): same structure, 4x4 grid with patch size 2 (so
    # unpatchify is exercised), 4 classes, tiny widths.
    "test_tiny": dict(img_size=32, vae_stride=4, patch_size=2, vae_embed_dim=4, buffer_size=4, class_num=4,
                      width=32, depth=1, heads=2, head_width=32, head_depth=2),
    # The same geometry a little larger: the tiny target beside test_tiny as its draft
    # (scripts/gpu/gpu_bench.sh --tiny runs the whole benchmark with these on a CPU).
    "test_small": dict(img_size=32, vae_stride=4, patch_size=2, vae_embed_dim=4, buffer_size=4, class_num=4,
                       width=64, depth=2, heads=4, head_width=64, head_depth=3),
    # A draft for mar_base: its token layout (16x16 grid of 16-dim tokens, 1000 classes, the
    # same KL-16 decoder), a fraction of its width and depth (about 2M against 208M
    # parameters), so `serve --target mar-base --draft mar-draft-small` runs spec mode at full
    # image size (docs/BENCHMARKS.md, "How fast is MAR-B on a CPU?").
    "mar_draft_small": dict(_IMAGENET, width=128, depth=2, heads=4, head_width=128, head_depth=2),
    # The same token layout again at a few MB per pack, for the service test that runs
    # serve -> POST -> 256x256 colour PNG in CI (scripts/tests/fullsize_serve_test.go) with the
    # ci_kl16 decoder below; ci_draft is its draft.
    "ci_target": dict(_IMAGENET, buffer_size=4, width=32, depth=1, heads=2, head_width=32, head_depth=2),
    "ci_draft": dict(_IMAGENET, buffer_size=4, width=16, depth=1, heads=1, head_width=16, head_depth=1),
}

# MAR's KL-16 VAE: ch 128, ch_mult (1,1,2,2,4) -> stride 16, 2 res blocks per level, attention
# only in the middle of the decoder, 16 latent channels. GroupNorm has 32 groups, so ch >= 32.
VAE_PRESETS = {
    "kl16": dict(ch=128, ch_mult=(1, 1, 2, 2, 4), num_res_blocks=2, z_channels=16, out_ch=3, attn_resolutions=()),
    "test_tiny": dict(ch=32, ch_mult=(1, 1, 2), num_res_blocks=1, z_channels=4, out_ch=3, attn_resolutions=()),
    # KL-16's shape (five levels -> stride 16, 16 latent channels, 3 output channels) at the
    # narrowest width GroupNorm(32) allows and one res block per level: about 1 MB of weights.
    "ci_kl16": dict(ch=32, ch_mult=(1, 1, 1, 1, 1), num_res_blocks=1, z_channels=16, out_ch=3, attn_resolutions=()),
}

LATENT_SCALE = 0.2325  # MAR multiplies VAE latents by this; sampled tokens are divided by it first


def grid_size(cfg):
    return cfg["img_size"] // cfg["vae_stride"] // cfg["patch_size"]


def token_dim(cfg):
    return cfg["vae_embed_dim"] * cfg["patch_size"] ** 2


def build_mar(cfg):
    n = grid_size(cfg)
    model = MAR(seq_len=n * n, token_dim=token_dim(cfg), width=cfg["width"], enc_depth=cfg["depth"],
                dec_depth=cfg["depth"], heads=cfg["heads"], buffer_size=cfg["buffer_size"],
                num_classes=cfg["class_num"], head_width=cfg["head_width"], head_depth=cfg["head_depth"])
    return model.eval()


# ---- VAE decoder (LDM AutoencoderKL naming: decoder.*, post_quant_conv.*) ----

def _norm(ch):
    return nn.GroupNorm(32, ch, eps=1e-6, affine=True)


def _swish(x):
    return x * torch.sigmoid(x)


class ResnetBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1, self.conv1 = _norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = _norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        if cin != cout:  # the 1x1 shortcut LDM calls nin_shortcut
            self.nin_shortcut = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = self.conv1(_swish(self.norm1(x)))
        h = self.conv2(_swish(self.norm2(h)))
        skip = self.nin_shortcut(x) if hasattr(self, "nin_shortcut") else x
        return skip + h


class AttnBlock(nn.Module):
    """Single-head self-attention over all pixels, 1x1 convolutions for q, k, v and output."""

    def __init__(self, ch):
        super().__init__()
        self.norm = _norm(ch)
        self.q, self.k, self.v = nn.Conv2d(ch, ch, 1), nn.Conv2d(ch, ch, 1), nn.Conv2d(ch, ch, 1)
        self.proj_out = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        h = self.norm(x)
        q = self.q(h).flatten(2).transpose(1, 2)           # [b, hw, c]
        k = self.k(h).flatten(2)                            # [b, c, hw]
        v = self.v(h).flatten(2).transpose(1, 2)           # [b, hw, c]
        att = torch.softmax((q @ k) / math.sqrt(c), dim=-1)  # [b, hw(query), hw(key)]
        out = (att @ v).transpose(1, 2).reshape(b, c, hh, ww)
        return x + self.proj_out(out)


class Upsample(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class _Level(nn.Module):
    """One resolution of the decoder: res blocks, optional attention after each, upsampling."""

    def __init__(self, blocks, attn, upsample):
        super().__init__()
        self.block = nn.ModuleList(blocks)
        self.attn = nn.ModuleList(attn)
        if upsample is not None:
            self.upsample = upsample


class VAEDecoder(nn.Module):
    """Latent [B, z, h, w] -> image [B, 3, h*2^(levels-1), ...] in about [-1, 1]."""

    def __init__(self, ch, ch_mult, num_res_blocks, z_channels, out_ch, attn_resolutions, resolution=256):
        super().__init__()
        levels = len(ch_mult)
        cur = ch * ch_mult[-1]
        res = resolution // 2 ** (levels - 1)
        self.conv_in = nn.Conv2d(z_channels, cur, 3, padding=1)
        self.mid = nn.Module()
        self.mid.block_1, self.mid.attn_1, self.mid.block_2 = ResnetBlock(cur, cur), AttnBlock(cur), ResnetBlock(cur, cur)
        ups = [None] * levels  # built coarsest first, stored finest first (the checkpoint's indices)
        for lvl in reversed(range(levels)):
            blocks, attn = [], []
            for _ in range(num_res_blocks + 1):
                blocks.append(ResnetBlock(cur, ch * ch_mult[lvl]))
                cur = ch * ch_mult[lvl]
                if res in attn_resolutions:
                    attn.append(AttnBlock(cur))
            ups[lvl] = _Level(blocks, attn, Upsample(cur) if lvl != 0 else None)
            if lvl != 0:
                res *= 2
        self.up = nn.ModuleList(ups)
        self.norm_out = _norm(cur)
        self.conv_out = nn.Conv2d(cur, out_ch, 3, padding=1)

    def forward(self, z):
        h = self.conv_in(z)
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(h)))
        for lvl in reversed(range(len(self.up))):
            level = self.up[lvl]
            for i, blk in enumerate(level.block):
                h = blk(h)
                if len(level.attn) > 0:
                    h = level.attn[i](h)
            if hasattr(level, "upsample"):
                h = level.upsample(h)
        return self.conv_out(_swish(self.norm_out(h)))


class VAE(nn.Module):
    """The decoding half of MAR's AutoencoderKL: post_quant_conv then decoder (names kept)."""

    def __init__(self, cfg):
        super().__init__()
        z = cfg["z_channels"]
        self.post_quant_conv = nn.Conv2d(z, z, 1)
        self.decoder = VAEDecoder(**cfg)
        self.eval()

    def decode(self, latents):
        return self.decoder(self.post_quant_conv(latents))


def unpatchify(tokens, grid, patch, channels):
    """MAR's token order: tokens [B, grid*grid, channels*patch*patch], token (row, col) holding
    (channel, i, j) -> latents [B, channels, grid*patch, grid*patch] at (row*patch+i, col*patch+j)."""
    b = tokens.shape[0]
    x = tokens.reshape(b, grid, grid, channels, patch, patch)
    x = x.permute(0, 3, 1, 4, 2, 5)  # b, c, row, i, col, j
    return x.reshape(b, channels, grid * patch, grid * patch)


class DecoderGraph(nn.Module):
    """What decoder.onnx computes: tokens [B, L, D] -> image [B, 3, H, W] (about [-1, 1])."""

    def __init__(self, vae, mar_cfg, latent_scale=LATENT_SCALE):
        super().__init__()
        self.vae, self.scale = vae, latent_scale
        self.grid, self.patch, self.channels = grid_size(mar_cfg), mar_cfg["patch_size"], mar_cfg["vae_embed_dim"]

    def forward(self, tokens):
        return self.vae.decode(unpatchify(tokens / self.scale, self.grid, self.patch, self.channels))


# ---- strict loading ----

def _names(keys, limit=8):
    keys = sorted(keys)
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def load_strict(module, state, what, ignore_prefixes=()):
    """Load state into module; a missing key, an unexpected key (outside ignore_prefixes) or a
    shape mismatch is a ValueError naming it and what was being loaded."""
    want = module.state_dict()
    given = {k: v for k, v in state.items() if not k.startswith(tuple(ignore_prefixes))}
    missing = set(want) - set(given)
    unexpected = set(given) - set(want)
    errors = []
    if missing:
        errors.append(f"missing keys: {_names(missing)}")
    if unexpected:
        errors.append(f"unexpected keys: {_names(unexpected)}")
    shapes = [f"{k} is {list(given[k].shape)}, want {list(want[k].shape)}"
              for k in sorted(set(want) & set(given)) if tuple(given[k].shape) != tuple(want[k].shape)]
    if shapes:
        errors.append("shape mismatch: " + "; ".join(shapes[:8]) + (f" and {len(shapes) - 8} more" if len(shapes) > 8 else ""))
    if errors:
        raise ValueError(f"{what}: " + "; ".join(errors))
    module.load_state_dict(given, strict=True)


# Keys of an AutoencoderKL checkpoint that decoding does not use: the encoder, its moments
# convolution, and the training loss (LPIPS/discriminator) that LDM checkpoints may carry.
VAE_UNUSED_PREFIXES = ("encoder.", "quant_conv.", "loss.")


def vae_state(ck, path):
    """The state dict inside a VAE checkpoint: MAR's {'model': ...}, LDM's {'state_dict': ...},
    or a bare state dict."""
    for key in ("model", "state_dict"):
        if isinstance(ck, dict) and isinstance(ck.get(key), dict):
            return ck[key]
    if isinstance(ck, dict) and ck and all(torch.is_tensor(v) for v in ck.values()):
        return ck
    keys = list(ck.keys()) if isinstance(ck, dict) else type(ck).__name__
    raise ValueError(f"{path}: no VAE state dict found (want a 'model' or 'state_dict' entry or a bare state dict; got {keys})")
