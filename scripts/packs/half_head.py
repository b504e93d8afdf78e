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
Needs only the onnx and numpy packages.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs.quantize_pack import attr, subgraphs
    from packs.unroll_head import OUTPUTS as LOOP_OUTPUTS  # the fused head's float64 results
except ImportError:
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
            scale, bias = f"{tag}/ln_scale", f"{tag}/ln_bias"
            if scale not in consts:  # in the outer graph, where half_pack.py looks for weights (both bodies read it)
                added = [numpy_helper.from_array(np.ones(width, np.float32), scale),
                         numpy_helper.from_array(np.zeros(width, np.float32), bias)]
                model.graph.initializer.extend(added)
                consts[scale], consts[bias] = added
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
        reads = {}
        for n in body.node:
            for i in n.input:
                reads[i] = reads.get(i, 0) + 1
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
            if [reads.get(v, 0) for v in (c_slice.output[0], u, sub.output[0], m)] != [1, 2, 1, 1]:
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
    if outer:  # before the If that reads them
        at = next(i for i, n in enumerate(g.node) if n.op_type == "If")
        nodes = list(g.node[:at]) + outer + list(g.node[at:])
        del g.node[:]
        g.node.extend(nodes)
    return saved
