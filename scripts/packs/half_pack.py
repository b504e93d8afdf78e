"""Add fp16 variants of a pack's transformer and head graphs, for the CUDA provider
(docs/gpu.md, "Half precision"; docs/model-pack.md, "precisions").

  /usr/bin/python3 scripts/packs/half_pack.py PACK [--out DIR] [--min-dim 64] [--keep REGEX] [--head-stream fp32|fp16]
                                               [--plain-norms] [--cpu-check DIR]

Without --out the variants are written into PACK; with --out, PACK is copied to DIR first
(DIR must not exist) and PACK is left alone. For transformer.onnx, head.onnx, the fused head
(the manifest's head_loop, if any) and the cached transformer (the manifest's cache, if any)
it writes NAME.fp16.onnx and records them in the manifest under precisions.fp16;
`marspec generate --device cuda --precision fp16` opens those instead (the CPU refuses them).

Every graph keeps its float32 (and float64) inputs and outputs, so the Go side feeds and
reads them as before; inside, the rules are torch.autocast's (what a MAR user runs on a GPU):
- MatMul and Gemm run in fp16, their constant weights stored in fp16 (half the bytes), and
  so do the products of two activations (attention's Q K^T and A V);
- an elementwise or data-movement node (Add, Mul, Sigmoid, Erf, Reshape, Slice, ...) runs in
  fp16 when every float input it reads is fp16, a constant or a LayerNorm's output, else in
  fp32: so the bias, the activation functions, the attention scaling and AdaLN's modulation of
  a norm (shift and scale come from a MatMul) run in fp16, while the residual stream, which
  starts in fp32 and adds a block's output at every layer, stays fp32 (one departure from
  autocast, which modulates in fp32 and rounds once before the next MatMul: a LayerNorm's
  output is of unit scale, and the head's loop pays for every Cast node at every step);
- every other node reading floats runs in fp32: LayerNormalization, Softmax, Sin/Cos/Exp (the
  timestep embedding), the mask arithmetic (ConstantOfShape, TopK, comparisons), and the fused
  head's sampler arithmetic (guidance, the posterior step, the noise): float64 in the fp32
  graph, as the Go sampler computes it; float32 here, as MAR's own code computes it, with the
  graph's float64 inputs and outputs cast once per call, guidance one fp32 MatMul of the two
  halves, each AdaLN shift folded into its block's Gemm and the schedule's coefficients
  combined once per call (half_head.py, which also writes a norm the exporter spelled out as
  seven nodes as one LayerNormalization; docs/gpu.md counts the nodes per step);
- in the fused head, each residual sum and the norm that reads it become one of ONNX Runtime's
  own SkipLayerNormalization nodes (com.microsoft; --plain-norms keeps the two ONNX nodes, for
  a build of ONNX Runtime without its own operators);
- a weight with fewer than --min-dim input or output channels stays fp32 (the 16-dim token
  projections in, the 2D-wide final projection out: their compute is negligible while their
  error lands directly on the tokens or on epsilon); --keep names more MatMul/Gemm to keep;
- --head-stream fp16 (for a trained head) makes the head's residual stream fp16, as autocast
  has it: there only few output channels keep a weight fp32, so the 16-wide input projection
  runs in fp16, and a LayerNorm of an fp16 value reads and writes fp16 (fp32 inside). A
  random-weight head's x_t outgrows fp16's range, hence not the default.
A Cast is inserted wherever a value crosses from one precision to the other (once per value).

--cpu-check DIR writes to DIR (which must not exist) a copy of the pack whose own graphs are a
CPU-runnable emulation of the fp16 graphs, for testing: each fp16 value is held in fp32 but
rounded through fp16 (Cast to fp16 and back) exactly where the fp16 graph holds it in fp16, the
fp16 weights stored as fp32 copies of their fp16 values, and each fp16 node computes in fp32
from those rounded inputs and rounds its result once. ONNX Runtime's CPU provider opens the
fp16 graphs themselves, but it has fp16 kernels for a few operators only and runs the others by
casting back to fp32, possibly dropping roundings the GPU keeps; the emulation is the stricter
CPU check (scripts/tests/half_pack_test.go runs both). It shows where the graphs round and that
the rounding is harmless; it does not prove the CUDA kernels' own arithmetic (an fp16
elementwise kernel may differ from the emulation in the last bit; cuBLAS sums in another order).
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
    from packs import half_head
    from packs.quantize_pack import attr, graph_files, write_variants
except ImportError:
    import half_head
    from quantize_pack import attr, graph_files, write_variants
from onnx import TensorProto, helper, numpy_helper

PRECISION = "fp16"
SCHEME = ("fp16 as torch.autocast: MatMul/Gemm and their weights fp16; elementwise fp16 where all its float inputs are; "
          "norms, softmax, sin/cos/exp, reductions, the residual stream and the fused head's sampler fp32; "
          "float32 (the fused head: float64) inputs and outputs")
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
FP16_MAX = float(np.finfo(np.float16).max)
# Ops that run in fp16 when every float input is fp16 or constant ("promote" in autocast's terms).
FOLLOW = {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Erf", "Tanh", "Sigmoid", "Relu", "Where", "Max", "Min", "Clip",
          "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "ScatterElements",
          "Squeeze", "Unsqueeze", "Expand", "Tile", "Identity", "Flatten"}
# Ops that read a tensor of any type without computing on its values.
ANY_TYPE = {"Shape", "Size", "Cast"}


def graph_attrs(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a
        elif a.type == onnx.AttributeProto.GRAPHS:
            raise SystemExit(f"{node.op_type} node {node.name}: GRAPHS attributes not supported")


def to_half(array):
    """fp16 copy of a float32 array; finite values beyond fp16's range saturate instead of
    becoming inf (an additive mask of -1e9 stays a large negative number)."""
    a = np.asarray(array, np.float32)
    clipped = np.where(np.isfinite(a), np.clip(a, -FP16_MAX, FP16_MAX), a)
    return clipped.astype(np.float16)


def original_types(model):
    """Element type of every value of the model (subgraphs included), by name."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}

    def collect(g):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        for init in g.initializer:
            types[init.name] = init.data_type
        for n in g.node:
            if n.op_type == "Constant":
                types[n.output[0]] = attr(n, "value").data_type
            for a in graph_attrs(n):
                collect(a.g)

    collect(inferred.graph)
    return types


def runs_in_half(node, weights, min_dim, keep, fp16_stream):
    """Whether a MatMul/Gemm runs in fp16: a constant weight (of weights, the main graph's) needs
    min_dim channels both ways (fp16_stream: output channels only) and keep not naming it; a
    product of two activations always does."""
    w = node.input[1]
    label = node.name or node.output[0]
    if label.startswith((half_head.SAMPLER, half_head.FP32)):  # the fused head's guidance, and what feeds an fp32 layer
        return False
    if keep and keep.search(label):
        return False
    if w in weights and len(weights[w].dims) == 2:
        dims = weights[w].dims
        outputs = dims[0] if node.op_type == "Gemm" and attr(node, "transB") else dims[1]
        if (outputs if fp16_stream else min(dims)) < min_dim:
            return False
    return True


class Scope:
    """One graph's values as the converted graph holds them: name -> (name now, element type)."""

    def __init__(self, parent=None):
        self.parent, self.values, self.casts = parent, {}, {}

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.values:
                return s.values[name], s
            s = s.parent
        return None, None


class Converter:
    def __init__(self, model, min_dim, keep, fp16_stream=False):
        self.model, self.main = model, model.graph
        self.fp16_stream = fp16_stream
        self.types = original_types(model)
        self.min_dim, self.keep = min_dim, keep
        self.weights = {i.name: i for i in self.main.initializer}
        self.half_weights = {}  # main-graph initializer name -> its fp16 copy's name
        self.constants = {}  # Constant nodes' float32 values
        self.normalised = set()  # LayerNormalization outputs
        self.kept, self.lowered = [], []
        self.fp16_values = set()  # names of the converted graphs' fp16 values, for the CPU check
        self.count = 0

    def is_float(self, name):
        return self.types.get(name) == F32

    def constant(self, name, scope):
        """Whether name is a constant: a main-graph initializer or a Constant node's output."""
        held, _ = scope.lookup(name)
        return held is not None and held[2]

    def lowered_matmul(self, node):
        label = node.name or node.output[0]
        lowered = runs_in_half(node, self.weights, self.min_dim, self.keep, self.fp16_stream)
        if not label.startswith(half_head.SAMPLER):  # the manifest lists the model's layers, not the sampler's
            (self.lowered if lowered else self.kept).append(label)
        return lowered

    def value(self, name, want, scope, nodes):
        """name as element type want (F16 or F32): itself, a cast of it (once per scope), or for a
        main-graph initializer its fp16 copy."""
        held, owner = scope.lookup(name)
        if held is None or held[1] == want:
            return held[0] if held else name
        if want == F16 and name in self.constants:  # a Constant node's value: an fp16 Constant beside it
            key = (name, "constant")
            if key not in scope.casts:  # per scope: a loop body cannot read a sibling branch's node
                self.count += 1
                half = f"{name}/fp16_{self.count}"
                value = numpy_helper.from_array(to_half(numpy_helper.to_array(self.constants[name])))
                nodes.append(helper.make_node("Constant", [], [half], name=half, value=value))
                scope.casts[key] = half
                self.fp16_values.add(half)
            return scope.casts[key]
        if want == F16 and name in self.weights and owner.parent is None:
            if name not in self.half_weights:
                half = f"{name}/fp16"
                self.main.initializer.append(numpy_helper.from_array(to_half(numpy_helper.to_array(self.weights[name])), half))
                self.half_weights[name] = half
            return self.half_weights[name]
        key = (name, want)
        if key not in scope.casts:
            self.count += 1
            out = f"{name}/to_{'fp16' if want == F16 else 'fp32'}"
            nodes.append(helper.make_node("Cast", [held[0]], [out], name=f"fp16_cast_{self.count}", to=want))
            scope.casts[key] = out
            if want == F16:
                self.fp16_values.add(out)
        return scope.casts[key]

    def graph(self, g, scope):
        """Converts graph g in place; its inputs, outputs and outer-scope reads keep their types."""
        for vi in g.input:
            scope.values[vi.name] = (vi.name, self.types.get(vi.name), False)
        for init in g.initializer:
            scope.values[init.name] = (init.name, init.data_type, True)
        outputs = {o.name for o in g.output}
        nodes = []
        for node in g.node:
            for a in graph_attrs(node):
                self.graph(a.g, Scope(scope))
            floats = [i for i in node.input if i and self.is_float(i)]
            if node.op_type == "Constant":
                scope.values[node.output[0]] = (node.output[0], attr(node, "value").data_type, True)
                if attr(node, "value").data_type == F32:
                    self.constants[node.output[0]] = attr(node, "value")
                nodes.append(node)
                continue
            if node.op_type in ("MatMul", "Gemm") and floats and self.lowered_matmul(node):
                want = F16
            elif self.fp16_stream and node.op_type == "LayerNormalization" and scope.lookup(node.input[0])[0][1] == F16:
                # autocast casts an fp16 input up and normalises in fp32: LayerNormalization does
                # that inside (stash_type 1) and hands its unit-scale result on in fp16
                want = F16
                if attr(node, "stash_type") is None:
                    node.attribute.append(helper.make_attribute("stash_type", 1))
            elif node.op_type in FOLLOW and floats:
                # constants and LayerNorm outputs (unit scale, rounded to fp16 before a MatMul in
                # any case) follow the others: AdaLN's modulation of a norm by fp16 shift and
                # scale then runs in fp16 without casting its inputs up and its output down
                computed = [i for i in floats if not self.constant(i, scope) and i not in self.normalised]
                held = [scope.lookup(i)[0][1] for i in computed]
                want = F16 if computed and all(t == F16 for t in held) else F32
            else:
                want = None if node.op_type in ANY_TYPE or not floats else F32
            if want is not None:
                node.input[:] = [self.value(i, want, scope, nodes) if i and self.is_float(i) else i for i in node.input]
            for o in node.output:
                t = self.types.get(o)
                if t == F32 and want == F16:
                    t = F16
                if node.op_type == "Cast":
                    t = attr(node, "to")
                scope.values[o] = (o, t, False)
                if t == F16:
                    self.fp16_values.add(o)
            if node.op_type == "LayerNormalization":
                self.normalised.add(node.output[0])
            nodes.append(node)
            # a graph output made in fp16 goes out in fp32 under its own name
            for k, o in enumerate(node.output):
                if o in outputs and scope.values[o][1] == F16:
                    inner = f"{o}/fp16"
                    node.output[k] = inner
                    scope.values[o] = (inner, F16, False)
                    self.fp16_values.discard(o)
                    self.fp16_values.add(inner)
                    nodes.append(helper.make_node("Cast", [inner], [o], name=f"{o}/to_fp32", to=F32))
        del g.node[:]
        g.node.extend(nodes)
        del g.value_info[:]  # the types inside changed; ONNX Runtime infers them again

    def drop_unused(self):
        used = set()

        def collect(g):
            for n in g.node:
                used.update(n.input)
                for a in graph_attrs(n):
                    collect(a.g)
            used.update(o.name for o in g.output)

        collect(self.main)
        kept = [i for i in self.main.initializer if i.name in used]
        del self.main.initializer[:]
        self.main.initializer.extend(kept)


def half_model(model, min_dim=64, keep=None, fp16_stream=False):
    """Converts model in place; returns (lowered MatMul/Gemm, kept fp32, fp16 value names).
    fp16_stream (--head-stream fp16, for a head): only few output channels keep a weight fp32,
    so a narrow input projection runs in fp16 and the residual stream after it is fp16, and a
    LayerNorm of an fp16 value reads and writes fp16."""
    c = Converter(model, min_dim, keep, fp16_stream)
    c.graph(model.graph, Scope())
    c.drop_unused()
    model.producer_name = "marspec half_pack.py"
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)  # every node's types agree
    return c.lowered, c.kept, c.fp16_values


def cpu_check_model(model, fp16_values):
    """The fp16 model with every fp16 value held in fp32 and rounded through fp16 where the fp16
    graph holds it (Cast to fp16 and back), fp16 weights as fp32 copies of their fp16 values:
    what the fp16 graph computes, runnable by ONNX Runtime's CPU provider."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    count = [0]

    def rounded(value, nodes):
        count[0] += 1
        pre = f"{value}/unrounded"
        nodes.append(helper.make_node("Cast", [pre], [f"{value}/as_fp16"], name=f"round_{count[0]}_a", to=F16))
        nodes.append(helper.make_node("Cast", [f"{value}/as_fp16"], [value], name=f"round_{count[0]}_b", to=F32))
        return pre

    def graph(g):
        inits = []
        for init in g.initializer:
            if init.data_type == F16:
                init = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name)
            inits.append(init)
        del g.initializer[:]
        g.initializer.extend(inits)
        nodes = []
        for node in g.node:
            for a in graph_attrs(node):
                graph(a.g)
            if node.op_type == "Constant" and attr(node, "value").data_type == F16:
                v = numpy_helper.to_array(attr(node, "value")).astype(np.float32)
                node = helper.make_node("Constant", [], list(node.output), name=node.name, value=numpy_helper.from_array(v))
            if node.op_type == "Cast" and attr(node, "to") == F16:
                for a in node.attribute:
                    if a.name == "to":
                        a.i = F32
            tail = []
            for k, o in enumerate(node.output):
                if o in fp16_values:
                    node.output[k] = rounded(o, tail)
            nodes.append(node)
            nodes.extend(tail)
        del g.node[:]
        g.node.extend(nodes)

    graph(m.graph)
    m.producer_name = "marspec half_pack.py --cpu-check"
    onnx.checker.check_model(m)
    return m


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pack")
    ap.add_argument("--out", help="copy the pack here first (must not exist); default: write into PACK")
    ap.add_argument("--min-dim", type=int, default=64, help="keep weights with fewer input or output channels fp32")
    ap.add_argument("--keep", help="regular expression: MatMul/Gemm node names to keep fp32")
    ap.add_argument("--head-stream", choices=("fp32", "fp16"), default="fp32",
                    help="the head's residual stream: fp32 (any head) or fp16 (a trained head: as MAR's own training and "
                         "evaluation run it under fp16 autocast; two Casts fewer per block and diffusion step)")
    ap.add_argument("--plain-norms", action="store_true",
                    help="keep each residual sum and its norm as two ONNX nodes in the fused head, for an ONNX Runtime "
                         "built without its own operators (com.microsoft); default: one SkipLayerNormalization")
    ap.add_argument("--cpu-check", metavar="DIR", help="also write DIR (must not exist): the pack with the CPU emulation of its fp16 graphs as its own graphs, for tests")
    args = ap.parse_args(argv)
    pack = args.pack
    for flag, d in (("--out", args.out), ("--cpu-check", args.cpu_check)):
        if d and os.path.exists(d):
            raise SystemExit(f"{flag} {d} exists: give a new folder")
    if args.out:
        shutil.copytree(pack, args.out)
        pack = args.out
    keep = re.compile(args.keep) if args.keep else None
    checks = {}
    with open(os.path.join(pack, "manifest.json")) as f:
        source = json.load(f)
    files = graph_files(source)
    clip_x0 = bool(source.get("diffusion", {}).get("clip_x0", False))

    def convert(file, model):
        norms = half_head.fuse_norms(model)
        loop = [o.name for o in model.graph.output] == half_head.LOOP_OUTPUTS
        casts = half_head.float_sampler(model) if loop else 0
        leaner = half_head.lean_guidance(model) if loop else 0
        stream = args.head_stream == "fp16" and file in (files.get("head"), files.get("head_loop"))
        weights = {i.name: i for i in model.graph.initializer}
        folded = half_head.fold_modulation(model, lambda gemm: runs_in_half(gemm, weights, args.min_dim, keep, stream)) \
            if loop else 0
        sampler = half_head.lean_sampler(model, clip_x0) if loop else 0
        if norms or loop:
            print(f"{file}: {norms} decomposed LayerNorm(s) made one node" +
                  (f"; sampler float32, {casts} Cast(s) dropped; per step: guidance {leaner} node(s) fewer (guided), "
                   f"{folded} modulation shift(s) into their Gemm, sampler {sampler} node(s) fewer" if loop else ""))
        lowered, kept, fp16_values = half_model(model, args.min_dim, keep, fp16_stream=stream)
        if loop and not args.plain_norms:  # after the conversion, whose checks do not know ONNX Runtime's own operators
            print(f"{file}: per step: {half_head.skip_norms(model)} residual sum(s) and norm(s) made one node")
        if args.cpu_check:
            checks[file] = cpu_check_model(model, fp16_values)  # a copy: model stays the fp16 graph
        return lowered, kept

    scheme = SCHEME + ("; the head's residual stream fp16 (--head-stream fp16)" if args.head_stream == "fp16" else "") + \
        ("; the fused head's residual sums and norms as two ONNX nodes (--plain-norms)" if args.plain_norms else
         "; the fused head's residual sums and norms as ONNX Runtime's SkipLayerNormalization (com.microsoft)")
    manifest = write_variants(pack, PRECISION, scheme, args.min_dim, convert)
    if files.get("head_loop") and not clip_x0:  # its sampler ignores the clip input (half_head.lean_sampler)
        manifest["precisions"][PRECISION]["head_loop_never_clips"] = True
        with open(os.path.join(pack, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    if args.cpu_check:
        write_cpu_check(pack, manifest, checks, args.cpu_check)


def write_cpu_check(pack, manifest, checks, dest):
    """The pack at dest with the emulated graphs in place of its fp32 ones; its other graphs
    (decoder, distilled head, early exit) are copied as they are, its precisions dropped."""
    shutil.copytree(pack, dest, ignore=lambda d, names: [n for n in names if ".int8." in n or ".fp16." in n])
    for file, model in checks.items():
        onnx.save(model, os.path.join(dest, file))
    m = dict(manifest)
    m.pop("precisions", None)
    m["name"] = manifest["name"] + "-fp16-cpu-check"
    with open(os.path.join(dest, "manifest.json"), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    print(f"{dest}: the fp16 graphs emulated on the CPU (for checks only)")


if __name__ == "__main__":
    main(sys.argv[1:])
