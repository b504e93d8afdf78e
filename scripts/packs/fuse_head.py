"""Build head_loop.onnx: a pack's whole reverse diffusion as one ONNX call.

  /usr/bin/python3 scripts/packs/fuse_head.py models/target [models/draft ...]

Reads PACK/head.onnx, writes PACK/head_loop.onnx and adds the optional "head_loop" entry to
PACK/manifest.json (docs/model-pack.md has the graph's inputs and outputs). Any pack: the
Fashion-MNIST ones and the official MAR layout alike (export_mar.py and make_random_packs.py
call add_to_pack unless --no-head-loop). The graph is an
ONNX Loop over the sampling steps whose body runs the head once over the cond (and uncond)
rows and then the sampler step of diffusion/ (Posterior + Step): everything random and every
schedule coefficient comes in as an input, so one graph serves every step count, guidance
scale, temperature and clipping setting. The sampler arithmetic is done in float64, in the
same order of operations as the Go code, so both paths agree to rounding.

A step inside ONNX Runtime costs mostly per node, so the body is kept small: shape arithmetic
the exporter left for run time is computed here, the AdaLN slices become one Split, the parts
of the head that do not change between steps run once per call (the projection of z; the
timestep embedding of all steps together, one row per iteration), and guided and unguided
runs get their own loop (an If picks one). The AdaLN modulations, which depend on the
timestep and z but not on x_t, run once per call too, for every step's rows at once; each
iteration takes its step's row of that stack and cuts it with one Split (plan_modulation: at
MAR-B's head this drops 24 of a step's 94 nodes and 20M of the 32M weights a step reads). The
manifest entry's stacked_width says how many floats per row and step that stack holds. The
loop bodies hold their own weights (loop_weights.py says why). Needs only the onnx and numpy
packages.
"""
import json
import os
import sys

import numpy as np
import onnx

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs import aligned_weights, loop_weights
except ImportError:
    import aligned_weights
    import loop_weights
from onnx import TensorProto, helper, numpy_helper

FORMAT = "marspec-head-loop/1"
# Columns of the coef input, one row per iteration (docs/model-pack.md).
COEFS = ["sqrt_recip_acp", "sqrt_recip_m1_acp", "coef1", "coef2", "half_log_var0", "half_log_var1"]
INT64_MAX = np.iinfo(np.int64).max
# Ops that act row by row, so the timestep-only part of the head may run over all S steps at once.
ROWWISE = {"Unsqueeze", "Cast", "Mul", "Add", "Sub", "Div", "Cos", "Sin", "Sigmoid", "Gemm", "Concat", "Constant"}
BROADCASTING = {"Add", "Mul", "Sub", "Div"}


def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def fold_static(graph):
    """Computes, once here, the shape arithmetic the exporter left for run time (sizes of the
    batch-independent axes) and every node that then has only constant inputs: a run of the
    fused graph pays for each node on every step."""
    shapes = inferred_shapes(graph)
    known = {n.output[0]: numpy_helper.to_array(attr(n, "value")) for n in graph.node if n.op_type == "Constant"}
    partial = {}  # Shape outputs with some static sizes
    kept = []
    for n in graph.node:
        if n.op_type == "Constant":
            kept.append(n)
            continue
        value = None
        if n.op_type == "Shape":
            dims = shapes.get(n.input[0])
            if dims is not None and None not in dims:
                value = np.array(dims, np.int64)
            elif dims is not None:
                partial[n.output[0]] = dims
        elif n.op_type == "Gather" and n.input[0] in partial and n.input[1] in known:
            picked = np.take(np.array([-1 if d is None else d for d in partial[n.input[0]]]), known[n.input[1]])
            if np.all(picked >= 0):
                value = picked.astype(np.int64)
        elif all(i in known for i in n.input):
            value = evaluate(n, [known[i] for i in n.input])
        if value is None:
            kept.append(n)
            continue
        known[n.output[0]] = value
        kept.append(helper.make_node("Constant", [], [n.output[0]], value=numpy_helper.from_array(np.asarray(value))))
    while True:  # drop what nothing reads any more
        used = {i for n in kept for i in n.input} | {o.name for o in graph.output}
        live = [n for n in kept if any(o in used for o in n.output)]
        if len(live) == len(kept):
            break
        kept = live
    del graph.node[:]
    graph.node.extend(kept)
    return known, shapes


def inferred_shapes(graph):
    """Every value's dims (None where not static), as ONNX's shape inference has them."""
    inferred = onnx.shape_inference.infer_shapes(onnx.helper.make_model(graph))
    return {vi.name: [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            for vi in list(inferred.graph.value_info) + list(graph.input)}


def evaluate(node, args):
    op = node.op_type
    if op in ("Add", "Sub", "Mul"):
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](*args)
    if op == "Div":
        a, b = args
        return (np.trunc(a / b).astype(a.dtype)) if a.dtype.kind == "i" else a / b
    if op == "Unsqueeze":
        return np.expand_dims(args[0], tuple(int(x) for x in args[1]))
    if op == "Concat":
        return np.concatenate(args, axis=attr(node, "axis"))
    return None  # anything else stays a node


def slices_to_split(graph, known, shapes):
    """Three Slices that cut one tensor into consecutive pieces (the AdaLN shift, scale and
    gate) become one Split node."""
    groups = {}
    for n in graph.node:
        if n.op_type == "Slice" and len(n.input) == 4 and all(i in known for i in n.input[1:]):
            groups.setdefault((n.input[0], int(known[n.input[3]].reshape(-1)[0])), []).append(n)
    replaced = {}
    for (data, axis), nodes in groups.items():
        size = shapes.get(data, [None] * (axis + 1))[axis]
        pieces = sorted((int(known[n.input[1]].reshape(-1)[0]), int(known[n.input[2]].reshape(-1)[0]), n) for n in nodes)
        if size is None or pieces[0][0] != 0 or pieces[-1][1] != size or any(
                a[1] != b[0] for a, b in zip(pieces, pieces[1:])):
            continue
        split = helper.make_node("Split", [data, f"{data}/split_sizes"], [p[2].output[0] for p in pieces], axis=axis)
        sizes = helper.make_node("Constant", [], [f"{data}/split_sizes"],
                                 value=numpy_helper.from_array(np.array([b - a for a, b, _ in pieces], np.int64)))
        for p in pieces:
            replaced[id(p[2])] = None
        replaced[id(pieces[0][2])] = [sizes, split]
    out = []
    for n in graph.node:
        if id(n) not in replaced:
            out.append(n)
        elif replaced[id(n)] is not None:
            out.extend(replaced[id(n)])
    del graph.node[:]
    graph.node.extend(out)


def dependencies(graph, roots):
    """For every tensor name, the subset of roots it is computed from."""
    deps = {name: {name} for name in roots}
    for node in graph.node:  # ONNX nodes are topologically sorted
        d = set()
        for i in node.input:
            d |= deps.get(i, set())
        for o in node.output:
            deps[o] = d
    return deps


# Row-wise ops the (timestep, condition) part of the head may be made of to run for all steps at once.
HOISTABLE = {"Add", "Sub", "Mul", "Div", "Sigmoid", "Tanh", "Relu", "Gemm", "Split", "Cast"}


def plan_modulation(tz, deps, shapes, nodes):
    """The AdaLN modulations of every block depend on the timestep and the condition only, not on
    x_t: SiLU(t_emb + c_emb), one Gemm per block, its Split and 1 + scale. Run per step they are
    most of a step's nodes and, at the few rows of an AR step, most of its weight reads (MAR-B:
    20M of the 32M weights a step touches). They can run once per call over all S steps' rows
    ([S*R, width]), each step then taking its row of the stack. Returns, for the values the rest
    of the head reads, their widths; None where this head's (t, z) part is not of that row-wise
    shape (then it stays in the loop)."""
    if not tz:
        return None
    made = {o for n in tz for o in n.output}
    for n in tz:
        if "t" in n.input or "z" in n.input:  # the raw inputs' shapes ([S], [G, N, W]) do not broadcast as rows
            return None
        reads_t = any(deps.get(i) == {"t"} for i in n.input if i)
        reads_z = any(deps.get(i) == {"z"} for i in n.input if i)
        if reads_t or reads_z:  # the one place the two meet: [S, 1, W] + [R, W] broadcasts to [S, R, W]
            if not (reads_t and reads_z) or n.op_type not in BROADCASTING or any(i in made for i in n.input):
                return None
        elif n.op_type not in HOISTABLE:
            return None
        if n.op_type == "Split" and attr(n, "axis", 0) not in (1, -1):
            return None
        if n.op_type == "Gemm" and attr(n, "transA", 0):
            return None
    rest = [n for n in nodes if n.op_type != "Constant" and n not in tz]
    frontier = []
    for n in rest:
        for i in n.input:
            if i in made and i not in frontier:
                frontier.append(i)
    widths = [(shapes.get(f) or [None])[-1] for f in frontier]
    if not frontier or None in widths or any(len(shapes[f]) != 2 for f in frontier):
        return None
    return list(zip(frontier, widths))


def hoist_modulation(tz, deps, plan):
    """The (t, z) part of the head over all steps' rows: its nodes, the stack [S, R, sum of
    widths] of the values the loop reads, their names and their widths."""
    outer = Builder("modulation/")
    own = {o: f"hoisted/{o}" for n in tz for o in n.output}
    per_step_t = {}
    for n in tz:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        inputs = []
        for i in n.input:
            if deps.get(i) == {"t"}:
                if i not in per_step_t:
                    per_step_t[i] = outer.op("Unsqueeze", [i, outer.const([1], np.int64)])
                inputs.append(per_step_t[i])
            else:
                inputs.append(own.get(i, i))
        m.input[:] = inputs
        m.output[:] = [own[o] for o in n.output]
        if any(deps.get(i) == {"t"} for i in n.input):  # [S, R, W] -> [S*R, W]: every later op is row-wise
            wide = m.output[0] + "/steps_by_rows"
            m.output[0] = wide
            outer.nodes.append(m)
            outer.op("Flatten", [wide], axis=2, name=own[n.output[0]])
        else:
            outer.nodes.append(m)
    frontier = [name for name, _ in plan]
    sizes = [width for _, width in plan]
    cat = own[frontier[0]] if len(frontier) == 1 else outer.op("Concat", [own[f] for f in frontier], axis=1)
    steps = outer.op("Shape", ["t"])
    stacked = outer.op("Reshape", [cat, outer.op("Concat", [steps, outer.const([-1, sum(sizes)], np.int64)], axis=0)])
    return outer.nodes, stacked, frontier, sizes


class Builder:
    """Collects nodes with fresh names."""

    def __init__(self, prefix):
        self.prefix, self.nodes, self.count = prefix, [], 0

    def op(self, op_type, inputs, n_out=1, name=None, **attrs):
        self.count += 1
        outs = [name] if name else [f"{self.prefix}{op_type}_{self.count}_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype):
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def fuse(head, dim, width):
    g = onnx.GraphProto()
    g.CopyFrom(head.graph)
    names = [i.name for i in g.input]
    if names != ["x_t", "t", "z"] or [o.name for o in g.output] != ["out"]:
        raise SystemExit(f"head.onnx has inputs {names} and outputs {[o.name for o in g.output]}, want x_t, t, z -> out")
    known, shapes = fold_static(g)
    slices_to_split(g, known, shapes)
    deps = dependencies(g, ["x_t", "t", "z"])
    const_nodes = [n for n in g.node if n.op_type == "Constant"]
    z_only = [n for n in g.node if n.op_type != "Constant" and deps[n.output[0]] == {"z"}]
    t_only = [n for n in g.node if n.op_type != "Constant" and deps[n.output[0]] == {"t"}]
    tz = [n for n in g.node if n.op_type != "Constant" and deps[n.output[0]] == {"t", "z"}]
    tz_plan = plan_modulation(tz, deps, inferred_shapes(g), g.node)
    hoisted_tz = tz if tz_plan else []
    head_nodes = [n for n in g.node if n.op_type != "Constant" and n not in z_only and n not in t_only
                  and n not in hoisted_tz]
    for n in t_only:
        if n.op_type not in ROWWISE or (n.op_type == "Concat" and attr(n, "axis") not in (-1, 1)):
            raise SystemExit(f"timestep part of the head has a {n.op_type} node: cannot precompute it per step")
    t_frontier = sorted({i for n in head_nodes for i in n.input if deps.get(i) == {"t"} and i != "t"})
    for n in head_nodes:
        if "t" in n.input:
            raise SystemExit("a loop-dependent node reads t directly: cannot precompute the timestep embedding")
        if any(i in t_frontier for i in n.input) and n.op_type not in BROADCASTING:
            raise SystemExit(f"timestep embedding feeds a {n.op_type} node: it must broadcast over rows")

    outer = Builder("outer/")
    i64 = lambda v: outer.const(v, np.int64)
    # z arrives as [G, N, W] (G = 2 under guidance: cond rows, then uncond rows).
    zshape = outer.op("Shape", ["z"])
    zflat = outer.op("Reshape", ["z", i64([-1, width])])
    n_rows = outer.op("Slice", [zshape, i64([1]), i64([2])])
    halves = outer.op("Slice", [zshape, i64([0]), i64([1])])
    slices = {
        "eps_c": (outer.op("Concat", [i64([0]), i64([0])], axis=0), outer.op("Concat", [n_rows, i64([dim])], axis=0)),
        "v": (outer.op("Concat", [i64([0]), i64([dim])], axis=0), outer.op("Concat", [n_rows, i64([2 * dim])], axis=0)),
        "eps_u": (outer.op("Concat", [outer.op("Neg", [n_rows]), i64([0])], axis=0), i64([INT64_MAX, dim])),
    }
    repeats = outer.op("Concat", [halves, i64([1])], axis=0)  # Tile repeats [G, 1]
    trips = outer.op("Gather", [outer.op("Shape", ["coef"]), outer.const(0, np.int64)], axis=0)
    lo, hi = outer.op("Split", ["clip"], n_out=2, axis=0)
    guided_flag = outer.op("Equal", [outer.op("Squeeze", [halves, i64([0])]), outer.const(2, np.int64)])

    def rename(nodes, mapping):
        out = []
        for n in nodes:
            m = onnx.NodeProto()
            m.CopyFrom(n)
            m.input[:] = [mapping.get(i, i) for i in n.input]
            out.append(m)
        return out

    # z-only and t-only parts run once per call; t becomes the [S] vector of steps.
    hoisted = rename(const_nodes, {}) + rename(z_only, {"z": zflat}) + rename(t_only, {})
    if tz_plan:
        modulation, stacked, frontier, sizes = hoist_modulation(tz, deps, tz_plan)
        hoisted += modulation

    def loop(guided):
        tag = "g" if guided else "u"
        body = Builder(f"body_{tag}/")
        it, x_in = "iter", "x_in"
        mapping = {name: body.op("Gather", [name, it], axis=0) for name in t_frontier}  # [width]: broadcasts over rows
        if tz_plan:  # this step's AdaLN shifts, scales and gates: one row of the stack, cut once
            row_mod = body.op("Gather", [stacked, it], axis=0)
            body.nodes.append(helper.make_node("Split", [row_mod, body.const(sizes, np.int64)], frontier, axis=1))
        xf = body.op("Cast", [x_in], to=TensorProto.FLOAT)
        mapping["x_t"] = body.op("Tile", [xf, repeats]) if guided else xf
        body.nodes.extend(rename(head_nodes, mapping))
        f64 = TensorProto.DOUBLE
        if guided:
            axes = body.const([0, 1], np.int64)
            eps_c = body.op("Slice", ["out", *slices["eps_c"], axes])
            v = body.op("Slice", ["out", *slices["v"], axes])
            # diffusion.GuidedEpsilon: uncond + scale*(cond - uncond) in float64, rounded once.
            eps_u = body.op("Slice", ["out", *slices["eps_u"], axes])
            c64, u64 = body.op("Cast", [eps_c], to=f64), body.op("Cast", [eps_u], to=f64)
            mixed = body.op("Add", [u64, body.op("Mul", ["cfg", body.op("Sub", [c64, u64])])])
            eps = body.op("Cast", [body.op("Cast", [mixed], to=TensorProto.FLOAT)], to=f64)
        else:
            eps_c, v = body.op("Split", ["out"], n_out=2, axis=1)
            eps = body.op("Cast", [eps_c], to=f64)
        row = body.op("Gather", ["coef", it], axis=0)
        a, b, c1, c2, lv0, lv1 = body.op("Split", [row], n_out=len(COEFS), axis=0)
        # diffusion.Schedule.Posterior, in float64.
        x0 = body.op("Sub", [body.op("Mul", [a, x_in]), body.op("Mul", [b, eps])])
        x0 = body.op("Max", [body.op("Min", [x0, hi]), lo])
        mean = body.op("Add", [body.op("Mul", [c1, x0]), body.op("Mul", [c2, x_in])], name=f"mean_out_{tag}")
        # Half the log-variance: lv0 + (v+1)*lv1 with lv0 = (post_log_var + temp_log)/2 and
        # lv1 = (log_beta - post_log_var)/4 (Go passes them: equal to Go's sum to ~1e-16).
        half_lv = body.op("Add", [lv0, body.op("Mul", [body.op("Add", [body.op("Cast", [v], to=f64), body.const([1.0], np.float64)]), lv1])],
                          name=f"lv_out_{tag}")
        # diffusion.Schedule.Step; Go zeroes the noise of a last step without noise, and mean + 0 = mean.
        noise = body.op("Gather", ["noise", it], axis=0)
        body.nodes.append(helper.make_node("Add", [mean, body.op("Mul", [body.op("Exp", [half_lv]), noise])], [f"x_out_{tag}"]))
        body.nodes.append(helper.make_node("Identity", ["cond_in"], [f"cond_out_{tag}"]))
        nd = ["N", dim]
        body_graph = helper.make_graph(
            body.nodes, f"step_{tag}",
            [helper.make_tensor_value_info(it, TensorProto.INT64, []),
             helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
             helper.make_tensor_value_info(x_in, f64, nd),
             helper.make_tensor_value_info("mean_in", f64, nd)],
            [helper.make_tensor_value_info(f"cond_out_{tag}", TensorProto.BOOL, []),
             helper.make_tensor_value_info(f"x_out_{tag}", f64, nd),
             helper.make_tensor_value_info(f"mean_out_{tag}", f64, nd),
             helper.make_tensor_value_info(f"lv_out_{tag}", f64, nd)])
        outs = [f"x0_{tag}", f"last_mean_{tag}", f"half_log_var_{tag}"]
        node = helper.make_node("Loop", [trips, "", "x_T", "x_T"], outs, body=body_graph)
        return helper.make_graph([node], f"run_{tag}", [], [
            helper.make_tensor_value_info(outs[0], f64, ["N", dim]),
            helper.make_tensor_value_info(outs[1], f64, ["N", dim]),
            helper.make_tensor_value_info(outs[2], f64, ["S", "N", dim])])

    branch = helper.make_node("If", [guided_flag], ["x0", "last_mean", "half_log_var"],
                              then_branch=loop(True), else_branch=loop(False))
    f64 = TensorProto.DOUBLE
    inputs = [
        helper.make_tensor_value_info("x_T", f64, ["N", dim]),
        helper.make_tensor_value_info("noise", f64, ["S", "N", dim]),
        helper.make_tensor_value_info("z", TensorProto.FLOAT, ["G", "N", width]),
        helper.make_tensor_value_info("cfg", f64, ["N", 1]),
        helper.make_tensor_value_info("t", TensorProto.FLOAT, ["S"]),
        helper.make_tensor_value_info("coef", f64, ["S", len(COEFS)]),
        helper.make_tensor_value_info("clip", f64, [2]),
    ]
    outputs = [
        helper.make_tensor_value_info("x0", f64, ["N", dim]),
        helper.make_tensor_value_info("last_mean", f64, ["N", dim]),
        helper.make_tensor_value_info("half_log_var", f64, ["S", "N", dim]),
    ]
    graph = helper.make_graph(outer.nodes + hoisted + [branch], "head_loop", inputs, outputs, list(g.initializer))
    model = helper.make_model(graph, opset_imports=list(head.opset_import), producer_name="marspec fuse_head.py")
    model.ir_version = head.ir_version
    loop_weights.into_bodies(model)
    onnx.checker.check_model(model, full_check=True)
    return model, len(head_nodes), sum(sizes) if tz_plan else 0


def add_to_pack(pack):
    """Writes PACK/head_loop.onnx from PACK/head.onnx and names it in the manifest; returns the
    manifest entry, the head nodes the loop body runs per step and head.onnx's own count."""
    man_path = os.path.join(pack, "manifest.json")
    with open(man_path) as f:
        manifest = json.load(f)
    head = onnx.load(os.path.join(pack, "head.onnx"))
    model, head_nodes, stacked = fuse(head, manifest["token_dim"], manifest["width"])
    onnx.save(model, os.path.join(pack, "head_loop.onnx"))
    manifest["head_loop"] = {"file": "head_loop.onnx", "format": FORMAT}
    if stacked:  # floats per row and step the graph computes once per call (marspec bounds that memory)
        manifest["head_loop"]["stacked_width"] = stacked
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    if any(not spec.get("head_loop") for spec in manifest.get("precisions", {}).values()):
        # mar.Manifest refuses a fused head that a precision lacks: the int8 graphs are derived
        print(f"note: {pack} has reduced-precision graphs without a fused head: run scripts/packs/quantize_pack.py {pack} again",
              file=sys.stderr)
    return manifest["head_loop"], head_nodes, sum(1 for n in head.graph.node if n.op_type != "Constant")


def main(packs):
    if not packs:
        raise SystemExit(__doc__)
    for pack in packs:
        _, per_step, total = add_to_pack(pack)
        print(f"{pack}: head_loop.onnx ({per_step} head nodes per step, {total} in head.onnx)")
        aligned_weights.align_pack(pack, only={"head_loop.onnx"})


if __name__ == "__main__":
    main(sys.argv[1:])
