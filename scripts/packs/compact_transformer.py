"""Re-export a Fashion-MNIST-style pack's transformer.onnx with the compact encoder
(marmodel.MAR.forward_compact: the encoder over the known tokens only, as MAR's sampler does),
keeping every other file of the pack.

  /usr/bin/python3 scripts/packs/compact_transformer.py --pack models/target --fixture mar/testdata/parity_target.json

--path masked-keys exports the earlier graph instead (every token through the encoder, the
unknown ones hidden as attention keys), which the test compares the compact one against.

The weights come from the pack's own graphs (ckpt_from_pack.rebuild, checked against the parity
fixture when one is given), so no checkpoint is needed. The new graph has the same inputs and
outputs; its z equals the masked-key graph's up to summation order (checked here on rows that
know different numbers of tokens, 1e-5). Packs with an int8 variant of the transformer must be
quantised again afterwards (scripts/packs/quantize_pack.py).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from packs.ckpt_from_pack import rebuild_checked
from lib.graphs import TransformerGraph


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", required=True)
    ap.add_argument("--fixture", help="parity fixture the rebuilt weights must reproduce (e.g. mar/testdata/parity_target.json)")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--path", choices=["compact", "masked-keys"], default="compact")
    args = ap.parse_args()
    model, manifest = rebuild_checked(args.pack, args.fixture, args.tol, "compact_transformer")
    L, D = model.seq_len, model.token_dim
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(3, L, D, generator=g)
    mask = torch.ones(3, L)
    mask[0, : L // 3] = 0
    mask[1, :] = 0
    ids = torch.tensor([0, 1, len(manifest["classes"]) - 1], dtype=torch.int64)
    drop = torch.tensor([0.0, 0.0, 1.0])
    with torch.no_grad():
        err = (model.forward_compact(tokens, mask, ids, drop) - model.forward_keep(tokens, mask, ids, drop)).abs().max().item()
        if err > args.tol:
            raise SystemExit(f"compact_transformer: compact encoder differs from the masked-key one by {err:.3g}")
        # traced on two rows knowing different counts (neither all nor none), so nothing is fixed to the trace
        trace_mask = torch.ones(2, L)
        trace_mask[0, : L // 3] = 0
        trace_mask[1, : L // 2] = 0
        torch.onnx.export(TransformerGraph(model, compact=args.path == "compact"), (tokens[:2], trace_mask, ids[:2], drop[:2]),
                          os.path.join(args.pack, "transformer.onnx"), opset_version=17,
                          input_names=["tokens", "mask", "class_ids", "drop_class"], output_names=["z"],
                          dynamic_axes={k: {0: "B"} for k in ["tokens", "mask", "class_ids", "drop_class", "z"]})
    print(f"compact_transformer: {args.pack}/transformer.onnx rewritten ({args.path} encoder; in PyTorch max |compact z - masked-key z| {err:.2g})")


if __name__ == "__main__":
    main()
