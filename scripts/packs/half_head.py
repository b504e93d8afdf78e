"""What half_pack.py changes in the head graphs before it converts them to fp16: fewer nodes
per diffusion step, for a fused head on a GPU that runs a kernel per node and is bound by their
count (docs/gpu.md, "What a step of the unrolled head is made of"). The fp32 graphs keep the
exact form the Go sampler reproduces bit for bit; an fp16 graph is held to a tolerance instead.

- fuse_norms: a LayerNorm the exporter wrote out as seven nodes (ReduceMean, Sub, Pow,
  ReduceMean, Add, Sqrt, Div: MAR's final layer, whose norm has no weight or bias) becomes one
  LayerNormalization with unit scale and zero bias.
- float_sampler: the fused head's sampler (guidance, the posterior step, the noise) runs in
  float32 instead of float64, as MAR's own code runs it (its diffusion extracts the schedule's
  coefficients as float32 tensors); the graph's float64 inputs and outputs are cast once per
  call, and the casts the float64 arithmetic needed at every step disappear.
- lean_guidance: then guidance is one MatMul of the head's cond and uncond halves (kept fp32
  by half_pack.py).
- fold_modulation: each block's AdaLN shift (with its norm's weight and bias) is made by the
  hoisted modulation Gemm with composed weights and enters the block's Gemm as its C; a layer
  whose Gemm stays fp32 (MAR's final layer) reads its scale and shift from fp32 stacks of its own.
- lean_sampler: the schedule's coefficients are combined once per call; for a pack that never
  clips x0 the posterior step collapses to A x_t - B eps.
- skip_norms (on the converted graph): each residual sum and the norm reading it become one
  SkipLayerNormalization, ONNX Runtime's own operator.
Every change is exact in real arithmetic; only float32 rounding moves
(scripts/tests/half_head_test.go).
Needs only the onnx and numpy packages.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs import loop_weights
    from packs.quantize_pack import attr, subgraphs
    from packs.unroll_head import OUTPUTS as LOOP_OUTPUTS  # the fused head's float64 results
except ImportError:
    import loop_weights
    from quantize_pack import attr, subgraphs
    from unroll_head import OUTPUTS as LOOP_OUTPUTS

F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE


def all_graphs(g):
    yield g
    for n in g.node:
        for s in subgraphs(n):
            yield from all_graphs(s)


def constant_tensors(model):
    """Every Constant node's and initializer's tensor, by name, over all graphs (read as arrays
    only where a value is needed: a head's weights are most of its bytes)."""
    tensors = {}
    for g in all_graphs(model.graph):
        for init in g.initializer:
            tensors[init.name] = init
        for n in g.node:
            if n.op_type == "Constant" and attr(n, "value") is not None:
                tensors[n.output[0]] = attr(n, "value")
    return tensors


def scalar(tensors, name):
    """The value of a one-element constant, else None."""
    t = tensors.get(name)
    if t is None or int(np.prod(t.dims)) != 1:
        return None
    return float(numpy_helper.to_array(t).reshape(-1)[0])


def is_last_axis_mean(node):
    axes = attr(node, "axes")
    return node.op_type == "ReduceMean" and len(node.input) == 1 and axes is not None and list(axes) == [-1] \
        and attr(node, "keepdims", 1) == 1


def width_read_by_weight(value, consts, readers):
    """The last dimension of value, read off the weight of the MatMul/Gemm it reaches through
    elementwise nodes (shape inference does not know the head's widths: the exporter slices
    with run-time shapes)."""
    seen = set()
    todo = [value]
    while todo:
        v = todo.pop()
        for n in readers.get(v, []):
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n.op_type in ("MatMul", "Gemm") and n.input[0] == v and n.input[1] in consts:
                dims = consts[n.input[1]].dims
                if len(dims) == 2:
                    return dims[0] if n.op_type == "MatMul" or not attr(n, "transB", 0) else dims[1]
            elif n.op_type in ("Mul", "Add", "Sub", "Cast", "Identity"):
                todo.extend(n.output)
    return None


def unit_norm(model, consts, width):
    """The names of a unit weight and a zero bias of width, for a LayerNormalization without
    affine terms: made once per width, in the outer graph, where half_pack.py looks for weights
    (both loop bodies read them)."""
    scale, bias = f"layernorm/unit{width}", f"layernorm/zero{width}"
    if scale not in consts:
        added = [numpy_helper.from_array(np.ones(width, np.float32), scale),
                 numpy_helper.from_array(np.zeros(width, np.float32), bias)]
        model.graph.initializer.extend(added)
        consts[scale], consts[bias] = added
    return scale, bias


def fuse_norms(model):
    """Replaces each decomposed LayerNorm over a last axis of known size with one
    LayerNormalization node; returns how many (per graph: a norm inside both loop bodies
    counts twice)."""
    consts = constant_tensors(model)
    fused = 0
    for g in all_graphs(model.graph):
        by_output = {o: n for n in g.node for o in n.output}
        readers = {}
        for n in g.node:
            for i in n.input:
                readers.setdefault(i, []).append(n)
            for s in subgraphs(n):  # a subgraph's reads of this graph's values count as readers
                for sn in all_graphs(s):
                    for nn in sn.node:
                        for i in nn.input:
                            readers.setdefault(i, []).append(n)
        drop = set()
        for div in g.node:
            if div.op_type != "Div":
                continue
            sub, sqrt = by_output.get(div.input[0]), by_output.get(div.input[1])
            if not (sub and sqrt and sub.op_type == "Sub" and sqrt.op_type == "Sqrt"):
                continue
            add = by_output.get(sqrt.input[0])
            if not (add and add.op_type == "Add"):
                continue
            var, eps = by_output.get(add.input[0]), scalar(consts, add.input[1])
            pow_ = by_output.get(var.input[0]) if var is not None else None
            mean = by_output.get(sub.input[1])
            if not (var is not None and is_last_axis_mean(var) and eps is not None
                    and pow_ is not None and pow_.op_type == "Pow" and pow_.input[0] == sub.output[0]
                    and scalar(consts, pow_.input[1]) == 2.0
                    and mean is not None and is_last_axis_mean(mean) and mean.input[0] == sub.input[0]):
                continue
            inner = [mean, sub, pow_, var, add, sqrt]
            width = width_read_by_weight(div.output[0], consts, readers)
            if width is None or any(len(readers.get(n.output[0], [])) != (2 if n is sub else 1) for n in inner):
                continue  # width unknown, or an intermediate value read elsewhere: leave it
            tag = div.output[0]
            scale, bias = unit_norm(model, consts, width)
            ln = helper.make_node("LayerNormalization", [sub.input[0], scale, bias], [tag], name=f"{tag}/ln",
                                  axis=-1, epsilon=eps)
            div.CopyFrom(ln)
            drop.update(id(n) for n in inner)
            fused += 1
        kept = [n for n in g.node if id(n) not in drop]
        del g.node[:]
        g.node.extend(kept)
    return fused


def float_sampler(model):
    """Turns a fused head's float64 arithmetic into float32 in place: its float64 inputs are
    cast once on entry and its outputs once on exit; the casts between float32 and float32
    this leaves are dropped. Returns how many Casts went (over all its graphs, not per step)."""
    g = model.graph
    if [o.name for o in g.output] != LOOP_OUTPUTS:
        raise SystemExit(f"float_sampler: not a fused head (outputs {[o.name for o in g.output]})")
    rename = {}
    entry = []
    for vi in g.input:
        if vi.type.tensor_type.elem_type == F64:
            rename[vi.name] = f"{vi.name}/f32"
            entry.append(helper.make_node("Cast", [vi.name], [rename[vi.name]], name=f"{vi.name}/to_f32", to=F32))
    exits = []
    for vi in g.output:
        if vi.type.tensor_type.elem_type == F64:
            exits.append(helper.make_node("Cast", [f"{vi.name}/f32"], [vi.name], name=f"{vi.name}/to_f64", to=F64))
    outputs = {vi.name: f"{vi.name}/f32" for vi in g.output if vi.type.tensor_type.elem_type == F64}
    for sg in all_graphs(g):
        for n in sg.node:
            n.input[:] = [rename.get(i, i) for i in n.input]
            if sg is g:
                n.output[:] = [outputs.get(o, o) for o in n.output]
            if n.op_type == "Cast" and attr(n, "to") == F64:
                for a in n.attribute:
                    if a.name == "to":
                        a.i = F32
            if n.op_type == "Constant" and attr(n, "value") is not None and attr(n, "value").data_type == F64:
                v = numpy_helper.to_array(attr(n, "value")).astype(np.float32)
                del n.attribute[:]
                n.attribute.append(helper.make_attribute("value", numpy_helper.from_array(v)))
        for i, init in enumerate(sg.initializer):
            if init.data_type == F64:
                sg.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
        if sg is not g:
            for vi in list(sg.input) + list(sg.output):
                if vi.type.tensor_type.elem_type == F64:
                    vi.type.tensor_type.elem_type = F32
        del sg.value_info[:]
    nodes = entry + list(g.node) + exits
    del g.node[:]
    g.node.extend(nodes)
    return drop_same_type_casts(model)


def drop_same_type_casts(model):
    """Removes every Cast whose input already has the type it casts to, reading its input
    instead; a Cast that writes a graph's output stays (the name must exist)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for sg in all_graphs(inferred.graph):
        for vi in list(sg.input) + list(sg.output) + list(sg.value_info):
            types[vi.name] = vi.type.tensor_type.elem_type
        for init in sg.initializer:
            types[init.name] = init.data_type
    dropped = 0
    replace = {}
    for sg in all_graphs(model.graph):
        outs = {o.name for o in sg.output}
        kept = []
        for n in sg.node:
            if n.op_type == "Cast" and types.get(n.input[0]) == attr(n, "to") and n.output[0] not in outs:
                replace[n.output[0]] = n.input[0]
                dropped += 1
                continue
            kept.append(n)
        del sg.node[:]
        sg.node.extend(kept)

    def resolve(name):
        while name in replace:
            name = replace[name]
        return name

    for sg in all_graphs(model.graph):
        for n in sg.node:
            n.input[:] = [resolve(i) for i in n.input]
    return dropped


# Node names of the sampler arithmetic this file writes; half_pack.py keeps their MatMul in fp32.
SAMPLER = "sampler/"
# Names of other MatMul/Gemm nodes this file writes whose results feed an fp32 layer: kept fp32 too.
FP32 = "fp32/"


def lean_guidance(model):
    """In a float32 fused head: the guided body's eps = u + cfg (c - u), three Slices of the
    head's output and three nodes per step, becomes one MatMul by [diag(cfg), diag(1 - cfg)]
    (made once per call from cfg) and one Split. Returns the nodes per guided step it saved.
    (x0's clipping stays Min then Max: ONNX Runtime's CUDA Clip has taken its bounds as
    host-memory inputs in some versions, a copy inside every step that a captured CUDA graph
    may not hold; one node is not worth that risk untested on a GPU.)"""
    g = model.graph
    cfg = "cfg/f32"
    if cfg not in {n.output[0] for n in g.node}:
        raise SystemExit("lean_guidance: run float_sampler first")
    saved = 0
    outer = []

    def const(name, value):
        outer.append(helper.make_node("Constant", [], [SAMPLER + name], value=numpy_helper.from_array(np.array(value))))
        return SAMPLER + name

    for body in all_graphs(g):
        if body is g:
            continue
        made = {o: n for n in body.node for o in n.output}
        readers = body_readers(body)
        drop, add = set(), {}
        for add_node in body.node:
            if add_node.op_type != "Add":
                continue
            u, m = add_node.input
            mul, sub = made.get(m), None
            if mul is not None and mul.op_type == "Mul" and mul.input[0] == cfg:
                sub = made.get(mul.input[1])
            if not (sub is not None and sub.op_type == "Sub" and sub.input[1] == u):
                continue
            c_slice, u_slice = made.get(sub.input[0]), made.get(u)
            if not (c_slice is not None and u_slice is not None and c_slice.op_type == u_slice.op_type == "Slice"
                    and c_slice.input[0] == u_slice.input[0]):
                continue
            if [len(readers.get(v, [])) for v in (c_slice.output[0], u, sub.output[0], m)] != [1, 2, 1, 1]:
                continue  # a value the replaced nodes make is read elsewhere too
            if not any(n.output[0] == SAMPLER + "guide" for n in outer):  # G [N, 2N]: row r takes cfg_r of cond row r and 1 - cfg_r of uncond row r
                rows = helper.make_node("Shape", [cfg], [SAMPLER + "shape"], start=0, end=1)
                zero = const("zero", np.zeros(1, np.float32))
                outer += [rows,
                          helper.make_node("Concat", [SAMPLER + "shape", SAMPLER + "shape"], [SAMPLER + "square"], axis=0),
                          helper.make_node("Expand", [zero, SAMPLER + "square"], [SAMPLER + "zeros"]),
                          helper.make_node("EyeLike", [SAMPLER + "zeros"], [SAMPLER + "eye"]),
                          helper.make_node("Sub", [const("one", np.ones(1, np.float32)), cfg], [SAMPLER + "uncond_weight"]),
                          helper.make_node("Mul", [SAMPLER + "eye", cfg], [SAMPLER + "cond_part"]),
                          helper.make_node("Mul", [SAMPLER + "eye", SAMPLER + "uncond_weight"], [SAMPLER + "uncond_part"]),
                          helper.make_node("Concat", [SAMPLER + "cond_part", SAMPLER + "uncond_part"], [SAMPLER + "guide"], axis=1)]
            tag = add_node.output[0]
            add[id(add_node)] = [
                helper.make_node("MatMul", [SAMPLER + "guide", c_slice.input[0]], [f"{tag}/guided"], name=f"{SAMPLER}{tag}/guided"),
                helper.make_node("Split", [f"{tag}/guided"], [tag, f"{tag}/mixed_v"], axis=1, name=f"{SAMPLER}{tag}/split")]
            drop.update(id(n) for n in (c_slice, u_slice, sub, mul, add_node))
            saved += 3
        nodes = []
        for n in body.node:
            nodes.extend(add.get(id(n), []))
            if id(n) not in drop:
                nodes.append(n)
        del body.node[:]
        body.node.extend(nodes)
    if outer:
        write_outer(g, list(g.node), outer)
    return saved


def write_outer(g, nodes, added):
    """Makes nodes g's nodes, with added placed before the If that reads them (the fused head's
    choice of the guided or the unguided loop)."""
    at = next(i for i, n in enumerate(nodes) if n.op_type == "If")
    nodes = nodes[:at] + added + nodes[at:]
    del g.node[:]
    g.node.extend(nodes)


def body_readers(body):
    readers = {}
    for n in body.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    return readers


def identity_sources(body):
    """A function giving the tensor an Identity chain in body reads (random packs' equal
    weights alias each other)."""
    alias = {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity"}

    def source(name):
        while name in alias:
            name = alias[name]
        return name
    return source


def loop_stack_splits(model):
    """For each loop body: the Split that cuts its step's row of the hoisted modulation stack
    (fuse_head.py) into the values the head reads; None where a body has none."""
    splits = []
    for body in loop_weights.loop_bodies(model):
        made = {o: n for n in body.node for o in n.output}
        found = None
        for n in body.node:
            gather = made.get(n.input[0]) if n.op_type == "Split" and len(n.input) == 2 else None
            if gather is not None and gather.op_type == "Gather" and gather.input[1] == body.input[0].name:
                found = (body, n, gather.input[0])
        splits.append(found)
    return splits


def modulated_gemms(body, pieces, consts):
    """The blocks of body whose modulated norm goes straight into a Gemm:
    Gemm(Add(Mul(LayerNorm(x), scale), shift)) with scale and shift pieces of the stack, by
    (scale, shift): their LayerNorm, Mul, Add and Gemm nodes, and the Gemm's weight and the
    norm's weight and bias as the tensors they alias."""
    made = {o: n for n in body.node for o in n.output}
    readers = body_readers(body)
    source = identity_sources(body)
    found = {}
    for add in body.node:
        if add.op_type != "Add":
            continue
        ins = list(add.input)
        shift = next((i for i in ins if i in pieces), None)
        mul = made.get(next((i for i in ins if i != shift), ""))
        if shift is None or mul is None or mul.op_type != "Mul":
            continue
        scale = next((i for i in mul.input if i in pieces), None)
        ln = made.get(next((i for i in mul.input if i != scale), ""))
        if scale is None or ln is None or ln.op_type != "LayerNormalization" or len(ln.input) != 3:
            continue
        gemms = readers.get(add.output[0], [])
        if len(gemms) != 1 or gemms[0].op_type != "Gemm" or gemms[0].input[0] != add.output[0]:
            continue
        gemm = gemms[0]
        w, gamma, beta = source(gemm.input[1]), source(ln.input[1]), source(ln.input[2])
        if attr(gemm, "transA", 0) or attr(gemm, "alpha", 1.0) != 1.0 or attr(gemm, "beta", 1.0) != 1.0 \
                or any(c not in consts for c in (w, gamma, beta)):
            continue
        if any(len(readers.get(n.output[0], [])) != 1 for n in (ln, mul)):
            continue
        found[(scale, shift)] = (ln, mul, add, gemm, w, gamma, beta)
    return found


def fold_modulation(model, folds_into=lambda gemm: True):
    """In a fused head: each block's Gemm(LayerNorm(x) * (1 + scale) + shift) becomes
    Gemm(LayerNorm'(x) * scale', W, C = shift'), one node fewer per block and diffusion step,
    where LayerNorm' has unit weight and zero bias, scale' = gamma (1 + scale) and
    shift' = (beta (1 + scale) + shift) W^T + b per row: both are linear in the AdaLN input u,
    so the hoisted modulation Gemm (run once per call for every step's rows) makes them with
    composed weights, at no extra arithmetic. folds_into(gemm) says which Gemms run in the
    stack's precision: the others (MAR's final layer, whose narrow Gemm stays fp32) get scale'
    and shift' from stacks of their own, made by Gemms named FP32 so that they stay fp32, and
    read a row of each per step: no Cast, no Split, no Add left in such a layer's step. Returns
    the nodes saved per step of one body."""
    consts = constant_tensors(model)
    g = model.graph
    splits = loop_stack_splits(model)
    if not splits or None in splits or len({s[2] for s in splits}) != 1:
        return 0
    stack = splits[0][2]
    pieces = list(splits[0][1].output)
    if any(list(s[1].output) != pieces for s in splits):
        return 0
    per_body = [modulated_gemms(body, set(pieces), consts) for body, _, _ in splits]
    keys = [k for k in per_body[0] if all(k in found for found in per_body[1:])]
    made = {o: n for n in g.node for o in n.output}
    reshape = made.get(stack)
    cat = made.get(reshape.input[0]) if reshape is not None and reshape.op_type == "Reshape" else None
    if cat is None or cat.op_type != "Concat" or len(cat.input) != len(pieces):
        return 0
    shape = made.get(reshape.input[1])
    last = made.get(shape.input[-1]) if shape is not None and shape.op_type == "Concat" else None
    if last is None or last.op_type != "Constant" or len(numpy_helper.to_array(attr(last, "value"))) != 2:
        raise SystemExit("fold_modulation: the stack's shape is not Concat(steps, [-1, width])")
    widths = {}
    for body, split, _ in splits:
        sizes = numpy_helper.to_array(consts[split.input[1]]).astype(np.int64)
        widths.update(zip(split.output, sizes))
    folded, dropped = 0, set()
    outer = []  # nodes making the stacks of layers whose Gemm stays fp32
    own = {}  # piece name -> (its own stack, a value per body: that stack's row at the body's step)
    superseded = set()  # outputs of the outer nodes that made those pieces
    for scale_name, shift_name in keys:
        blocks = [found[(scale_name, shift_name)] for found in per_body]
        ln, mul, add, gemm, w, gamma, beta = blocks[0]
        in_stack = all(folds_into(b[3]) for b in blocks)
        if any(b[4:] != (w, gamma, beta) for b in blocks[1:]) or (not in_stack and any(folds_into(b[3]) for b in blocks)):
            continue
        scale_outer = made.get(cat.input[pieces.index(scale_name)])  # 1 + scale piece
        shift_outer = cat.input[pieces.index(shift_name)]
        one = scale_outer.input[1] if scale_outer is not None and scale_outer.op_type == "Add" else None
        split_outer = made.get(scale_outer.input[0]) if one is not None else None
        if split_outer is None or split_outer.op_type != "Split" or shift_outer not in split_outer.output \
                or one not in consts or len(split_outer.input) != 2 or split_outer.input[1] not in consts:
            continue
        mod = made.get(split_outer.input[0])
        if mod is None or mod.op_type != "Gemm" or attr(mod, "transA", 0) or attr(mod, "alpha", 1.0) != 1.0 \
                or attr(mod, "beta", 1.0) != 1.0 or len(mod.input) != 3 or mod.input[1] not in consts \
                or mod.input[2] not in consts:
            continue
        w_mod = numpy_helper.to_array(consts[mod.input[1]]).astype(np.float64)
        w_mod = w_mod if attr(mod, "transB", 0) else w_mod.T  # [out, in]
        b_mod = numpy_helper.to_array(consts[mod.input[2]]).astype(np.float64).reshape(-1)
        sizes = numpy_helper.to_array(consts[split_outer.input[1]]).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        rows = lambda k: slice(starts[k], starts[k + 1])
        k_sc, k_sh = list(split_outer.output).index(scale_outer.input[0]), list(split_outer.output).index(shift_outer)
        w1 = numpy_helper.to_array(consts[w]).astype(np.float64)
        w1 = w1 if attr(gemm, "transB", 0) else w1.T  # [out, in]
        b1 = numpy_helper.to_array(consts[gemm.input[2]]).astype(np.float64).reshape(-1) if len(gemm.input) > 2 \
            else np.zeros(w1.shape[0])
        ga = numpy_helper.to_array(consts[gamma]).astype(np.float64).reshape(-1)
        be = numpy_helper.to_array(consts[beta]).astype(np.float64).reshape(-1)
        k1 = np.broadcast_to(numpy_helper.to_array(consts[one]).astype(np.float64).reshape(-1), ga.shape)
        if b1.shape != (w1.shape[0],) or w1.shape[1] != ga.size or sizes[k_sc] != ga.size or sizes[k_sh] != ga.size:
            continue
        w_sc, b_sc, w_sh, b_sh = w_mod[rows(k_sc)], b_mod[rows(k_sc)], w_mod[rows(k_sh)], b_mod[rows(k_sh)]
        new_w = {k_sc: ga[:, None] * w_sc, k_sh: w1 @ (be[:, None] * w_sc + w_sh)}
        new_b = {k_sc: ga * b_sc, k_sh: w1 @ (be * (k1 + b_sc) + b_sh) + b1}
        tag = mod.output[0]

        def weight(name, value):
            value = np.asarray(value)
            g.initializer.append(numpy_helper.from_array(value.astype(np.float32) if value.dtype.kind == "f" else value, f"{tag}/{name}"))
            return f"{tag}/{name}"

        if in_stack:
            new_sizes = [w1.shape[0] if k == k_sh else int(s) for k, s in enumerate(sizes)]
            mod.input[1] = weight("folded_weight", np.concatenate([new_w.get(k, w_mod[rows(k)]) for k in range(len(sizes))]))
            mod.input[2] = weight("folded_bias", np.concatenate([new_b.get(k, b_mod[rows(k)]) for k in range(len(sizes))]))
            for a in list(mod.attribute):
                if a.name == "transB":
                    mod.attribute.remove(a)
            mod.attribute.append(helper.make_attribute("transB", 1))
            split_outer.input[1] = weight("folded_sizes", np.array(new_sizes, np.int64))
            scale_outer.input[1] = weight("folded_one", ga * k1)
            if new_sizes[k_sh] != sizes[k_sh]:
                widths[shift_name] = new_sizes[k_sh]
        else:  # own stacks, [steps, rows, width] as the shared one: the +1 goes into the scale's bias
            for piece, k, bias in ((scale_name, k_sc, new_b[k_sc] + ga * k1), (shift_name, k_sh, new_b[k_sh])):
                name = f"{tag}/own{k}"
                outer += [helper.make_node("Gemm", [mod.input[0], weight(f"own{k}_weight", new_w[k]), weight(f"own{k}_bias", bias)],
                                           [f"{name}/rows"], name=f"{FP32}{name}", transB=1),
                          helper.make_node("Concat", [*shape.input[:-1], weight(f"own{k}_shape", np.array([-1, new_w[k].shape[0]], np.int64))],
                                           [f"{name}/shape"], axis=0),
                          helper.make_node("Reshape", [f"{name}/rows", f"{name}/shape"], [name])]
                own[piece] = (name, [f"{name}/row_{body.name}" for body, _, _ in splits])
            superseded.update(n.output[0] for n in (mod, split_outer, scale_outer))
        unit, zero = unit_norm(model, consts, ga.size)
        for i, (b_ln, b_mul, b_add, b_gemm, *_) in enumerate(blocks):
            b_ln.input[1], b_ln.input[2] = unit, zero
            if in_stack:
                b_gemm.input[:] = [b_mul.output[0], b_gemm.input[1], shift_name]
            else:
                b_mul.input[:] = [own[scale_name][1][i] if v == scale_name else v for v in b_mul.input]
                b_gemm.input[:] = [b_mul.output[0], b_gemm.input[1], own[shift_name][1][i]]
            dropped.add(id(b_add))
        folded += 1
    for i, (body, split, _) in enumerate(splits):  # rebuilt once, before the outer graph: extend copies, the nodes held above would go stale
        it = body.input[0].name
        rows = [helper.make_node("Gather", [stack_name, it], [row_names[i]], axis=0) for stack_name, row_names in own.values()]
        kept = rows + [n for n in body.node if id(n) not in dropped]
        del body.node[:]
        body.node.extend(kept)
    kept_pieces = [p for p in pieces if p not in own]
    if own:  # the shared stack no longer carries those pieces, nor their modulation Gemm its rows
        cat.input[:] = [v for v, p in zip(cat.input, pieces) if p not in own]
        # the Gemm, Split and 1 + scale that made those pieces go once nothing left reads them:
        # one pass from the graph's end, as each reads the one before
        read, kept = {o.name for o in g.output}, []
        for n in reversed(list(g.node)):
            if n.output[0] in superseded and not read & set(n.output):
                continue
            kept.append(n)
            read.update(n.input)
            read.update(i for sub in subgraphs(n) for sg in all_graphs(sub) for m in sg.node for i in m.input)
        write_outer(g, kept[::-1], outer)
    total = sum(int(widths[p]) for p in kept_pieces)
    before = int(numpy_helper.to_array(attr(last, "value"))[1])
    if total != before or own:  # a shift piece narrower than its norm (W 2D wide: a final layer in the stack), or pieces gone
        for _, split, _ in loop_stack_splits(model):
            split.input[1] = f"{stack}/folded_sizes"
            split.output[:] = [p for p in split.output if p not in own]
        g.initializer.append(numpy_helper.from_array(np.array([int(widths[p]) for p in kept_pieces], np.int64), f"{stack}/folded_sizes"))
        shape = next(n for n in g.node if n.output[0] == shape.output[0])  # the node as rebuilt above
        shape.input[-1] = f"{stack}/folded_shape"
        g.initializer.append(numpy_helper.from_array(np.array([-1, total], np.int64), f"{stack}/folded_shape"))
    return folded


def lean_sampler(model, clip_x0):
    """In a float32 fused head: the schedule's coefficients combined once per call (in float64,
    from the coef input, then rounded) so that a step needs fewer nodes. Half the log-variance,
    lv0 + (v + 1) lv1, becomes lv0' + v lv1 with lv0' = lv0 + lv1. A pack that never clips x0
    (MAR's: clip_x0 false) has mean = c1 x0 + c2 x_t with x0 = a x_t - b eps, which is
    A x_t - B eps with A = c1 a + c2 and B = c1 b: three nodes instead of eight, and the graph
    ignores its clip input (half_pack.py records that in the manifest). Returns the nodes saved
    per step of one body."""
    g = model.graph
    entry = next((n for n in g.node if n.op_type == "Cast" and list(n.input) == ["coef"]), None)
    if entry is None:
        raise SystemExit("lean_sampler: run float_sampler first")
    coef32 = entry.output[0]
    cols = [f"{SAMPLER}coef{k}" for k in range(6)]  # fuse_head.COEFS: a, b, c1, c2, lv0, lv1
    a, b, c1, c2, lv0, lv1 = cols
    outer = [helper.make_node("Split", ["coef"], cols, axis=1, name=f"{SAMPLER}coef_split"),
             helper.make_node("Add", [lv0, lv1], [f"{SAMPLER}lv0_plus_lv1"])]
    if clip_x0:
        combined = [a, b, c1, c2, f"{SAMPLER}lv0_plus_lv1", lv1]
    else:
        outer += [helper.make_node("Mul", [c1, a], [f"{SAMPLER}c1a"]),
                  helper.make_node("Add", [f"{SAMPLER}c1a", c2], [f"{SAMPLER}mean_x"]),
                  helper.make_node("Mul", [c1, b], [f"{SAMPLER}mean_eps"])]
        combined = [f"{SAMPLER}mean_x", f"{SAMPLER}mean_eps", f"{SAMPLER}lv0_plus_lv1", lv1]
    outer += [helper.make_node("Concat", combined, [f"{SAMPLER}coef_combined"], axis=1),
              helper.make_node("Cast", [f"{SAMPLER}coef_combined"], [coef32], name=entry.name, to=F32)]
    at = list(g.node).index(entry)
    nodes = list(g.node[:at]) + outer + list(g.node[at + 1:])
    del g.node[:]
    g.node.extend(nodes)

    saved = 0
    consts = constant_tensors(model)
    for body in loop_weights.loop_bodies(model):
        made = {o: n for n in body.node for o in n.output}
        readers = body_readers(body)
        it = body.input[0].name
        gather = next(n for n in body.node if n.op_type == "Gather" and list(n.input) == [coef32, it])
        split = readers[gather.output[0]][0]
        s = list(split.output)

        def only(name, op):  # the one node reading name, if it is an op node
            r = readers.get(name, [])
            return r[0] if len(r) == 1 and r[0].op_type == op else None

        # lv: Add(s4, Mul(Add(v, 1), s5)) -> Add(s4', Mul(v, s5))
        mul_lv = only(s[5], "Mul")
        plus_one = made.get(next((i for i in mul_lv.input if i != s[5]), "")) if mul_lv is not None else None
        if plus_one is None or plus_one.op_type != "Add" or scalar(consts, plus_one.input[1]) != 1.0 \
                or len(readers[plus_one.output[0]]) != 1:
            raise SystemExit("lean_sampler: the half log-variance is not lv0 + (v + 1) lv1")
        mul_lv.input[:] = [plus_one.input[0] if i == plus_one.output[0] else i for i in mul_lv.input]
        drop = {id(plus_one)}
        if not clip_x0:
            # Sub(Mul(s0, x), Mul(s1, eps)) -> Min -> Max -> Mul(s2, .) + Mul(s3, x) = mean
            mul_a, mul_b = only(s[0], "Mul"), only(s[1], "Mul")
            sub = only(mul_a.output[0], "Sub") if mul_a is not None else None
            lo_hi = only(sub.output[0], "Min") if sub is not None else None
            clip = only(lo_hi.output[0], "Max") if lo_hi is not None else None
            mul_c1, mul_c2 = only(s[2], "Mul"), only(s[3], "Mul")
            mean = only(mul_c1.output[0], "Add") if mul_c1 is not None else None
            if None in (mul_b, clip, mul_c2, mean) or list(sub.input) != [mul_a.output[0], mul_b.output[0]] \
                    or clip.output[0] not in mul_c1.input or mul_c2.output[0] not in mean.input:
                raise SystemExit("lean_sampler: the posterior step is not c1 clip(a x - b eps) + c2 x")
            sub.output[0] = mean.output[0]
            drop |= {id(n) for n in (lo_hi, clip, mul_c1, mul_c2, mean)}
            split.output[:] = [s[0], s[1], s[4], s[5]]
        kept = [n for n in body.node if id(n) not in drop]
        saved = len(body.node) - len(kept)
        del body.node[:]
        body.node.extend(kept)
    return saved


MS_DOMAIN = "com.microsoft"


def skip_norms(model):
    """In each loop body: a residual Add whose sum a LayerNormalization reads, and the norm, become
    one SkipLayerNormalization (an ONNX Runtime operator, com.microsoft; its CPU and CUDA kernels
    take 2-D rows), which hands on the normalised sum and the sum itself: one node fewer per block
    after the first and for the final layer. The same arithmetic, normalised in fp32; with an
    fp16 stream the kernel may normalise the sum before rounding it, where the two nodes round
    first. Run on the converted graph (the onnx checker and shape inference do not know the
    operator). Returns the nodes saved per step of one body."""
    consts = constant_tensors(model)
    saved = 0
    for body in loop_weights.loop_bodies(model):
        made = {o: n for n in body.node for o in n.output}
        readers = body_readers(body)
        order = {id(n): k for k, n in enumerate(body.node)}
        drop = set()
        for ln in body.node:
            add = made.get(ln.input[0]) if ln.op_type == "LayerNormalization" else None
            if add is None or add.op_type != "Add" or len(ln.input) < 2 or attr(ln, "axis", -1) != -1 \
                    or any(i in consts or i not in made for i in add.input) or len(ln.output) != 1:
                continue  # a sum with a constant may broadcast; SkipLayerNormalization's skip may not
            others = [r for r in readers.get(add.output[0], []) if r is not ln]
            if any(order[id(r)] < order[id(ln)] for r in others):
                continue  # the sum would be read before the fused node makes it
            keep_sum = others or add.output[0] in {o.name for o in body.output}
            inputs = list(ln.input[:3])
            ln.CopyFrom(helper.make_node("SkipLayerNormalization", [add.input[0], add.input[1], *inputs[1:]],
                                         [ln.output[0], "", "", add.output[0]] if keep_sum else [ln.output[0]],
                                         name=f"{ln.output[0]}/skip_ln", domain=MS_DOMAIN,
                                         epsilon=attr(ln, "epsilon", 1e-5)))
            drop.add(id(add))
        kept = [n for n in body.node if id(n) not in drop]
        saved = len(body.node) - len(kept)
        del body.node[:]
        body.node.extend(kept)
    if saved and not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return saved
