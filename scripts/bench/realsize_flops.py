"""FLOPs of one transformer pass, one head step and one decode of an official MAR architecture,
counted by PyTorch's profiler (with_flops: matrix products and convolutions, 2 per
multiply-add; element-wise work, a few percent here, is not counted), for bench --parts'
GFLOP/s (scripts/bench/realsize_cpu_bench.py).

  /usr/bin/python3 scripts/bench/realsize_flops.py --model mar_base --num-iter 8

The transformer's work depends on how many tokens are known: MAR's sampler (and marspec's
packs since the compact export) run the encoder over the buffer and the known tokens only, the
decoder over the whole sequence. Printed per AR step of MAR's cosine schedule and as the mean
pass of that schedule; the full-sequence encoder (marspec's packs before the compact export) is
printed beside it. Random weights: FLOPs do not depend on them. Prints one JSON object.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import mar_official as mo


def flops(fn):
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        fn()
    return sum(e.flops for e in prof.key_averages() if e.flops)


def known_per_step(seq_len, num_iter):
    """Tokens known before each AR step of MAR's cosine schedule (sample_tokens' mask_len)."""
    known, masked = [], seq_len
    for step in range(num_iter):
        known.append(seq_len - masked)
        mask_len = max(1, min(masked - 1, math.floor(seq_len * math.cos(math.pi / 2 * (step + 1) / num_iter))))
        masked = mask_len if step < num_iter - 1 else 0
    return known


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mar_base", choices=sorted(mo.MAR_PRESETS))
    ap.add_argument("--vae-config", default="kl16", choices=sorted(mo.VAE_PRESETS))
    ap.add_argument("--num-iter", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = mo.MAR_PRESETS[args.model]
    model = mo.build_mar(cfg)
    L, D = model.seq_len, model.token_dim
    tokens, ids, drop = torch.randn(1, L, D), torch.zeros(1, dtype=torch.int64), torch.zeros(1)

    def mask_knowing(n):
        m = torch.ones(1, L)
        m[0, :n] = 0
        return m

    steps = known_per_step(L, args.num_iter)
    compact = [flops(lambda n=n: model.forward_compact(tokens, mask_knowing(n), ids, drop)) for n in steps]
    full = flops(lambda: model.forward_keep(tokens, mask_knowing(0), ids, drop))
    rows = 64
    head = flops(lambda: model.diffloss.net(torch.randn(rows, D), torch.full((rows,), 500.0), torch.randn(rows, cfg["width"])))
    vae = mo.VAE(mo.VAE_PRESETS[args.vae_config])
    decode = flops(lambda: mo.DecoderGraph(vae, cfg)(torch.randn(1, L, D)))
    print(json.dumps({
        "model": args.model, "num_iter": args.num_iter, "seq_len": L, "known_per_step": steps,
        "transformer_gflop_per_step": [round(f / 1e9, 3) for f in compact],
        "transformer_gflop_mean_pass": sum(compact) / len(compact) / 1e9,
        "transformer_gflop_full_sequence": full / 1e9,
        "head_gflop_per_token_step": head / rows / 1e9,
        "decode_gflop_per_image": decode / 1e9,
        "counted": "torch.profiler with_flops: matrix products and convolutions, per image (batch 1)",
    }))


if __name__ == "__main__":
    main()
