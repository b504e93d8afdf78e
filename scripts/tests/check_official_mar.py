"""Checks scripts/lib/mar_official.py against the official MAR code: same parameter names (strict
loading both ways) and the same outputs on the same weights, for the transformer (encoder that
drops the known-token mask, decoder), the diffusion head and the VAE decoder.

  /usr/bin/python3 scripts/tests/check_official_mar.py --code /path/to/mar [--model test_small]

--code is a copy of github.com/LTH14/mar (fetched by hand, never committed). Runs on the CPU in
seconds at the test sizes (about a minute for mar_base with --vae-config kl16); timm and tqdm stand-ins as in official_mar_bench.py. Exits non-zero
on a difference over --tolerance.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import mar_official as mo
from bench.official_mar_bench import install_stand_ins, official_class
from packs.make_random_packs import randomise as randomise_scaled
from tests.test_export_mar import randomise


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", required=True)
    ap.add_argument("--model", default="test_small", choices=sorted(mo.MAR_PRESETS))
    ap.add_argument("--vae-config", default="test_tiny", choices=sorted(mo.VAE_PRESETS))
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args()
    stand_ins = install_stand_ins()
    sys.path.insert(0, os.path.abspath(args.code))
    from models import mar as official_mar  # noqa: E402
    from models import vae as official_vae  # noqa: E402

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    cfg, vcfg = mo.MAR_PRESETS[args.model], mo.VAE_PRESETS[args.vae_config]
    ours = mo.build_mar(cfg)
    randomise_scaled(ours, gen)  # weights at a trained model's scale, so float32 rounding stays small
    theirs = official_class(official_mar, cfg).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    mo.load_strict(ours, theirs.state_dict(), "official state dict")  # and back: no key of theirs is unknown here

    worst = {}

    def rel(a, b):
        """Largest difference relative to the reference's largest magnitude (at least 1)."""
        return ((a - b).abs().max() / max(1.0, b.abs().max().item())).item()

    L, D = ours.seq_len, ours.token_dim
    b = 2
    tokens = torch.randn(b, L, D, generator=gen)
    mask = torch.zeros(b, L)
    mask[:, torch.randperm(L, generator=gen)[: L // 2]] = 1  # MAR's encoder needs one mask count per batch
    ids = torch.tensor([0, cfg["class_num"] - 1])
    with torch.no_grad():
        z_theirs = theirs.forward_mae_decoder(theirs.forward_mae_encoder(tokens, mask, theirs.class_emb(ids)), mask)
        worst["transformer (keep-and-mask export path)"] = rel(ours.forward_keep(tokens, mask, ids, torch.zeros(b)), z_theirs)
        worst["transformer (dropping path)"] = rel(ours.forward_drop(tokens, mask, ids, torch.zeros(b)), z_theirs)
        z_fake = theirs.forward_mae_decoder(theirs.forward_mae_encoder(tokens, mask, theirs.fake_latent.repeat(b, 1)), mask)
        worst["transformer, no class (CFG)"] = rel(ours.forward_keep(tokens, mask, ids, torch.ones(b)), z_fake)
        n = 5
        x, t, c = torch.randn(n, D, generator=gen), torch.tensor([0.0, 10.0, 300.0, 700.0, 999.0]), torch.randn(n, cfg["width"], generator=gen)
        worst["diffusion head"] = rel(ours.diffloss.net(x, t, c), theirs.diffloss.net(x, t, c))
        # the official unpatchify on our token order
        worst["unpatchify"] = rel(mo.unpatchify(tokens, mo.grid_size(cfg), cfg["patch_size"], cfg["vae_embed_dim"]),
                                 theirs.unpatchify(tokens))

        vae = mo.VAE(vcfg)
        randomise(vae, gen, std=0.1)
        dec = official_vae.Decoder(ch=vcfg["ch"], ch_mult=vcfg["ch_mult"], num_res_blocks=vcfg["num_res_blocks"],
                                   z_channels=vcfg["z_channels"], out_ch=vcfg["out_ch"], attn_resolutions=vcfg["attn_resolutions"],
                                   resolution=cfg["img_size"]).eval()
        dec.load_state_dict(vae.decoder.state_dict(), strict=True)
        lat = torch.randn(2, vcfg["z_channels"], mo.grid_size(cfg) * cfg["patch_size"], mo.grid_size(cfg) * cfg["patch_size"], generator=gen)
        worst["VAE decoder"] = rel(vae.decoder(lat), dec(lat))
    bad = False
    for what, err in worst.items():
        ok = err <= args.tolerance
        bad |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: largest difference {err:.2g} (relative to the output's largest magnitude when over 1)")
    print(f"stand-ins: {', '.join(stand_ins) or 'none'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
