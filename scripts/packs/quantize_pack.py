"""Add int8 variants of a pack's transformer and head graphs (docs/model-pack.md, "precisions").

  /usr/bin/python3 scripts/packs/quantize_pack.py PACK [--out DIR] [--min-dim 64] [--keep REGEX]

Without --out the variants are written into PACK; with --out, PACK is copied to DIR first
(DIR must not exist) and PACK is left alone. For transformer.onnx, head.onnx, the fused head
(the manifest's head_loop, if any), the cached transformer (the manifest's cache, if any) and
the picked transformer (the manifest's picked, if any) it writes NAME.int8.onnx and records
them in the manifest under precisions.int8; `marspec generate --precision int8` opens those instead.

The scheme is dynamic quantisation of every MatMul/Gemm with a constant weight:
weights int8, symmetric, one scale per output channel (so a channel with small weights keeps
its resolution); activations symmetric with one scale per row (the last axis: one token of
one image), peak |x| / 127, stored as uint8 around a fixed zero point of 128. The chain:
Abs -> ReduceMax -> Max(tiny) -> Div 127 (the row scales) -> Div -> QuantizeLinear (scale 1,
zero point 128: round half to even and saturate in one node) -> ONNX Runtime's
MatMulIntegerToFloat (com.microsoft: the u8 x s8 product, exact in int32, times the channel
scales, on pre-packed weights) -> Mul by the row scales -> Add bias in fp32. A row's result
depends on that row alone, so an int8 image is the same whatever images share its batch,
and the service merges int8 jobs as it merges fp32 ones. (One scale per call,
DynamicQuantizeLinear, fuses into a single DynamicQuantizeMatMul node and is faster on small
models, but it makes every row depend on its batch-mates: docs/BENCHMARKS.md has both
speeds.) The graphs need ONNX Runtime (the contrib operator), as marspec does.

What stays fp32, and why: LayerNorm, softmax, GELU/SiLU and the attention products of two
activations (Q K^T, A V) are not MatMuls with a constant weight, so they are never touched;
a weight with fewer than --min-dim input or output channels (the 16-dim token projections in,
the 2D-wide final projection out) stays fp32, because its compute is negligible while its
error lands directly on the tokens or on epsilon; --keep names more layers to keep.
Needs only the onnx and numpy packages.
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np
import onnx

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs import aligned_weights, loop_weights
except ImportError:
    import aligned_weights
    import loop_weights
from onnx import TensorProto, helper, numpy_helper

PRECISION = "int8"
SCHEME = "dynamic-int8: weights symmetric per output channel, activations symmetric per row (uint8 around 128)"
ZERO_POINT = "int8.row_zero_point"  # shared constants of the per-row chains
ROW_LEVELS = "int8.row_levels"
TINY = "int8.row_tiny"
UNIT = "int8.unit_scale"
LAST_AXIS = "int8.last_axis"


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def subgraphs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def quantize_weight(w):
    """w [K, N] -> int8 [K, N] and per-column scales [N] with w ~ q * scale."""
    peak = np.abs(w).max(axis=0)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


class Quantizer:
    """Rewrites a model in place; quantised weights go to the main graph's initializers, which
    subgraphs (the fused head's loop bodies) see as outer-scope values."""

    def __init__(self, model, min_dim, keep):
        self.model = model
        self.main = model.graph
        self.consts = {i.name: i for i in self.main.initializer}
        self.min_dim, self.keep = min_dim, keep
        self.done = {}  # weight name (+ transposed flag) -> (int8 name, scale name): shared weights once
        self.quantized, self.kept = [], []
        self.count = 0
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.have_constants = self.have_axes = False

    def weight(self, name, transposed):
        key = (name, transposed)
        if key not in self.done:
            w = numpy_helper.to_array(self.consts[name]).astype(np.float32)
            if transposed:
                w = w.T
            q, s = quantize_weight(w)
            base = f"{name}.{PRECISION}" + (".t" if transposed else "")
            self.main.initializer.extend([numpy_helper.from_array(q, base), numpy_helper.from_array(s, base + ".scale")])
            self.done[key] = (base, base + ".scale")
        return self.done[key]

    def candidate(self, node):
        """(activation, weight name, transposed, bias name or None) for a MatMul/Gemm with a
        constant 2-D weight, else None."""
        if node.op_type == "MatMul" and node.input[1] in self.consts:
            w = self.consts[node.input[1]]
            return (node.input[0], node.input[1], False, None) if len(w.dims) == 2 else None
        if node.op_type == "Gemm" and node.input[1] in self.consts:
            if attr(node, "alpha", 1.0) != 1.0 or attr(node, "beta", 1.0) != 1.0 or attr(node, "transA", 0):
                return None
            bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
            if bias is not None and (bias not in self.consts or len(self.consts[bias].dims) != 1):
                return None
            return node.input[0], node.input[1], bool(attr(node, "transB", 0)), bias
        return None

    def rewrite(self, node, act, wname, transposed, bias):
        """The per-row chain; returns its nodes, the last one writing node.output[0].

        Each row (the last axis: one token of one image) gets its own symmetric scale,
        peak |x| / 127, and is stored as uint8 around the fixed zero point 128, so the integer
        product is exact and a row's result never depends on the rows beside it."""
        self.count += 1
        p = f"q{self.count}/"
        qname, sname = self.weight(wname, transposed)
        tiny = self.constants()
        out = node.output[0]
        mm = out if bias is None else p + "scaled"
        return [
            helper.make_node("Abs", [act], [p + "abs"], name=p + "abs"),
            self.row_max(p + "abs", p + "peak", p + "peak"),
            helper.make_node("Max", [p + "peak", tiny], [p + "peak1"], name=p + "floor"),
            helper.make_node("Div", [p + "peak1", ROW_LEVELS], [p + "xs"], name=p + "row_scale"),
            helper.make_node("Div", [act, p + "xs"], [p + "xn"], name=p + "normalise"),
            # round half to even, + 128, saturated to uint8: one node
            helper.make_node("QuantizeLinear", [p + "xn", UNIT, ZERO_POINT], [p + "xq"], name=p + "to_uint8"),
            # ONNX Runtime's u8 x s8 kernel: the exact integer product times the channel scales
            helper.make_node("MatMulIntegerToFloat", [p + "xq", qname, UNIT, sname, ZERO_POINT], [p + "wscaled"],
                             name=p + "matmul", domain="com.microsoft"),
            helper.make_node("Mul", [p + "wscaled", p + "xs"], [mm], name=p + "dequantize"),
        ] + ([] if bias is None else [helper.make_node("Add", [mm, bias], [out], name=p + "bias")])

    def constants(self):
        """The scalars every chain shares, added to the main graph once."""
        if not self.have_constants:
            self.main.initializer.extend([
                numpy_helper.from_array(np.array(128, np.uint8), ZERO_POINT),
                numpy_helper.from_array(np.array(127.0, np.float32), ROW_LEVELS),
                numpy_helper.from_array(np.array(1.0, np.float32), UNIT),
                numpy_helper.from_array(np.array(1e-30, np.float32), TINY),
            ])
            self.have_constants = True
        return TINY

    def row_max(self, x, out, name):
        """ReduceMax over the last axis, keeping it (axes moved from attribute to input at opset 18)."""
        if self.opset >= 18:
            if not self.have_axes:
                self.main.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), LAST_AXIS))
                self.have_axes = True
            return helper.make_node("ReduceMax", [x, LAST_AXIS], [out], name=name, keepdims=1)
        return helper.make_node("ReduceMax", [x], [out], name=name, axes=[-1], keepdims=1)

    def graph(self, g):
        nodes = []
        for node in g.node:
            for sub in subgraphs(node):
                self.graph(sub)
            c = self.candidate(node)
            if c is None:
                nodes.append(node)
                continue
            w = self.consts[c[1]]
            k, n = (w.dims[1], w.dims[0]) if c[2] else (w.dims[0], w.dims[1])
            label = node.name or node.output[0]
            if min(k, n) < self.min_dim or (self.keep and self.keep.search(label)):
                self.kept.append(label)
                nodes.append(node)
                continue
            self.quantized.append(label)
            nodes.extend(self.rewrite(node, *c))
        del g.node[:]
        g.node.extend(nodes)

    def drop_unused(self):
        used = set()

        def collect(g):
            for n in g.node:
                used.update(n.input)
                for sub in subgraphs(n):
                    collect(sub)
            used.update(o.name for o in g.output)

        collect(self.main)
        kept = [i for i in self.main.initializer if i.name in used]
        del self.main.initializer[:]
        self.main.initializer.extend(kept)


def quantize_model(model, min_dim=64, keep=None):
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    q = Quantizer(model, min_dim, keep)
    q.graph(model.graph)
    q.drop_unused()
    model.producer_name = "marspec quantize_pack.py"
    onnx.checker.check_model(model)
    return q.quantized, q.kept


def graph_files(manifest):
    files = {"transformer": "transformer.onnx", "head": "head.onnx"}
    if manifest.get("head_loop"):
        files["head_loop"] = manifest["head_loop"]["file"]
    if manifest.get("cache"):
        files["transformer_cached"] = manifest["cache"]["file"]
    if manifest.get("picked"):
        files["transformer_picked"] = manifest["picked"]["file"]
    return files


def variant_name(file, precision=PRECISION):
    """transformer.onnx -> transformer.int8.onnx (or the precision given)."""
    stem, ext = os.path.splitext(file)
    return f"{stem}.{precision}{ext}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pack")
    ap.add_argument("--out", help="copy the pack here first (must not exist); default: write into PACK")
    ap.add_argument("--min-dim", type=int, default=64, help="keep weights with fewer input or output channels fp32")
    ap.add_argument("--keep", help="regular expression: MatMul/Gemm node names to keep fp32")
    args = ap.parse_args(argv)
    pack = args.pack
    if args.out:
        if os.path.exists(args.out):
            raise SystemExit(f"--out {args.out} exists: give a new folder (or no --out to write into {pack})")
        shutil.copytree(pack, args.out)
        pack = args.out
    keep = re.compile(args.keep) if args.keep else None
    write_variants(pack, PRECISION, SCHEME, args.min_dim, lambda file, model: quantize_model(model, args.min_dim, keep))


def write_variants(pack, precision, scheme, min_dim, convert):
    """Writes a variant of each of PACK's graphs at precision (transformer.PRECISION.onnx, ...)
    and names them in the manifest under precisions; convert(file, model) changes a loaded
    fp32 graph in place and returns the MatMul/Gemm nodes it converted and those it kept fp32.
    Large graphs then get page-aligned weights. Returns the manifest written."""
    man_path = os.path.join(pack, "manifest.json")
    with open(man_path) as f:
        manifest = json.load(f)
    entry = {}
    record = {"scheme": scheme, "min_dim": min_dim, "fp32_layers": {}}
    written = set()
    for role, file in graph_files(manifest).items():
        model = onnx.load(os.path.join(pack, file))
        loop_weights.out_of_bodies(model)  # the converters look weights up in the outer graph
        converted, kept = convert(file, model)
        loop_weights.into_bodies(model)
        out = variant_name(file, precision)
        onnx.save(model, os.path.join(pack, out))
        entry[role] = out
        written.add(out)
        record["fp32_layers"][role] = list(dict.fromkeys(kept))  # a fused head names each layer twice (guided and not)
        before, after = aligned_weights.graph_bytes(pack, file), aligned_weights.graph_bytes(pack, out)
        print(f"{pack}/{out}: {len(converted)} MatMul/Gemm {precision}, {len(kept)} kept fp32, "
              f"{before / 1e6:.2f} MB -> {after / 1e6:.2f} MB")
    entry["quantization"] = record
    manifest.setdefault("precisions", {})[precision] = entry
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    aligned_weights.align_pack(pack, only=written)  # the new graphs' weights mapped, not copied, when large
    return manifest


if __name__ == "__main__":
    main(sys.argv[1:])
