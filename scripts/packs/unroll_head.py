"""Unroll a pack's fused head loop for one step count: no Loop, no If, so CUDA can capture it.

  /usr/bin/python3 scripts/packs/unroll_head.py PACK [--steps 100] [--steps 64 ...]

head_loop.onnx (fuse_head.py) runs the reverse diffusion as an ONNX Loop inside an If that
picks the guided or unguided body. ONNX Runtime pays for every Loop iteration (a subgraph run,
and on CUDA a copy of the loop condition back to the host), and its CUDA graph capture refuses
control flow altogether. This tool writes, for every step count asked and for guided and
unguided runs, the same computation with the body repeated once per step: inputs and outputs
as head_loop.onnx's with the step axis S and the halves axis G fixed. It reads each head loop
graph the pack has (fp32 and every precision's: int8, fp16), so it runs after quantize_pack.py
and half_pack.py; they, and fuse_head.py, drop the unrolled entries when they rewrite the graph
the entries were made from. Default steps: the pack's diffusion.sampling_steps.

The manifest lists the graphs under head_loop.unrolled (fp32) and precisions.P.head_loop_unrolled,
each {"file", "steps", "guided"} (docs/model-pack.md). Every step of the body becomes nodes of
its own that read the weights the loop read: the file holds the weights once, not S times.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs import aligned_weights
except ImportError:
    import aligned_weights

OUTPUTS = ["x0", "last_mean", "half_log_var"]


def attr(node, name):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    raise SystemExit(f"{node.op_type} node {node.name!r} has no attribute {name}")


def inline_loop(loop, steps, suffix, ranks):
    """The Loop node's work as plain nodes over `steps` iterations; the nodes write the Loop's
    own output names, so what read the Loop reads them unchanged."""
    body = attr(loop, "body")
    carried = list(loop.input[2:])
    n_carried = len(carried)
    if any(not name for name in carried):
        raise SystemExit("head loop: a loop-carried value without an initial value")
    iter_name, cond_name = body.input[0].name, body.input[1].name
    carried_in = [v.name for v in body.input[2:]]
    body_outs = [v.name for v in body.output]
    scan_outs = body_outs[1 + n_carried:]

    # Nodes that depend on no loop input are loop-invariant (constants, casts of outer values): once.
    varying = set(v.name for v in body.input)
    invariant, per_step = [], []
    for n in body.node:
        if any(i in varying for i in n.input):
            varying.update(n.output)
            per_step.append(n)
        else:
            invariant.append(n)
    nodes = list(invariant)
    initializers = list(body.initializer)
    true = f"unrolled{suffix}/true"
    axis0 = f"unrolled{suffix}/axis0"
    ones = f"unrolled{suffix}/ones"
    nodes.append(helper.make_node("Constant", [], [true], value=numpy_helper.from_array(np.array(True))))
    nodes.append(helper.make_node("Constant", [], [axis0], value=numpy_helper.from_array(np.array([0], np.int64))))
    nodes.append(helper.make_node("Constant", [], [ones], value=numpy_helper.from_array(np.ones(steps, np.int64))))
    # The body reads the iteration number only to pick step i's row of a per-step tensor
    # (Gather on axis 0). Each such tensor is split into its rows once; a constant index per
    # step instead costs ONNX Runtime time quadratic in the count of constants when the
    # session opens (1.5 s for 1,000, 30 s for 4,000 on this machine). A tensor of rank 2 or
    # more is split with its first two axes merged, so each piece is a row already: a Split
    # into [1, ...] pieces would need a Squeeze per row and step, a kernel each on a GPU.
    rows, squeezed = {}, set()
    # A row of a [S, k] tensor that only a Split into its k values reads (the schedule's
    # coefficients) is cut into all S*k values at once instead: no Split per step either.
    readers = {}
    for n in per_step:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    precut = {}  # the Gather's output -> (its Split, that Split's outputs for every step)
    for n in per_step:
        if iter_name not in n.input or ranks.get(n.input[0]) != 2 or len(readers.get(n.output[0], [])) != 1:
            continue
        cut = readers[n.output[0]][0]
        if cut.op_type == "Split" and list(cut.input) == [n.output[0]] and gather_axis(cut) == 0:
            k = len(cut.output)
            pieces = [f"{n.input[0]}/value{i}{suffix}" for i in range(steps * k)]
            flat = f"{n.input[0]}/values{suffix}"
            nodes.append(helper.make_node("Reshape", [n.input[0], f"unrolled{suffix}/minus_one"], [flat]))
            nodes.append(helper.make_node("Split", [flat], pieces, axis=0))
            precut[n.output[0]] = (cut, [pieces[i * k:(i + 1) * k] for i in range(steps)])
    if precut:
        nodes.insert(0, helper.make_node("Constant", [], [f"unrolled{suffix}/minus_one"],
                                         value=numpy_helper.from_array(np.array([-1], np.int64))))
    for n in per_step:
        if n.output[0] in precut:
            continue
        if iter_name not in n.input:
            continue
        if n.op_type != "Gather" or list(n.input[1:]) != [iter_name] or gather_axis(n) != 0 or n.input[0] in varying:
            raise SystemExit(f"head loop body reads the iteration number in a {n.op_type} node: only a Gather of "
                             "a per-step tensor's row can be unrolled")
        src = n.input[0]
        if src in rows:
            continue
        rows[src] = [f"{src}/row{i}" for i in range(steps)]
        if ranks.get(src, 0) >= 2:
            nodes.extend(split_rows(src, steps, rows[src], suffix))
        else:
            nodes.append(helper.make_node("Split", [src, ones], rows[src], axis=0))
            squeezed.add(src)
    scans = [[] for _ in scan_outs]
    for step in range(steps):
        tag = f"@{suffix}{step}"
        names = {cond_name: true, **dict(zip(carried_in, carried))}
        for n in per_step:
            if n.output[0] in precut:  # step's values of the pre-cut tensor, for what its Split wrote
                cut, per_step_values = precut[n.output[0]]
                names.update(zip(cut.output, per_step_values[step]))
                continue
            if any(n is cut for cut, _ in precut.values()):
                continue
            if iter_name in n.input:
                if n.input[0] in squeezed:
                    names[n.output[0]] = f"{n.output[0]}{tag}"
                    nodes.append(helper.make_node("Squeeze", [rows[n.input[0]][step], axis0], [names[n.output[0]]]))
                else:
                    names[n.output[0]] = rows[n.input[0]][step]
                continue
            m = onnx.NodeProto()
            m.CopyFrom(n)
            m.name = f"{n.name}{tag}" if n.name else ""
            m.input[:] = [names.get(i, i) for i in n.input]
            for k, o in enumerate(n.output):
                if o:  # an optional output left out stays unnamed
                    names[o] = f"{o}{tag}"
                    m.output[k] = names[o]
            nodes.append(m)
        carried = [names.get(o, o) for o in body_outs[1:1 + n_carried]]
        for k, o in enumerate(scan_outs):
            scans[k].append(names.get(o, o))
    for name, value in zip(loop.output[:n_carried], carried):
        nodes.append(helper.make_node("Identity", [value], [name]))
    nodes.append(helper.make_node("Constant", [], [f"unrolled{suffix}/steps"],
                                  value=numpy_helper.from_array(np.array([steps], np.int64))))
    for name, values in zip(loop.output[n_carried:], scans):
        # steps' rows one after another, then the step axis in front: no Unsqueeze per step
        shape = helper.make_node("Concat", [f"unrolled{suffix}/steps", f"{name}/row_shape"], [f"{name}/shape"], axis=0)
        nodes += [helper.make_node("Concat", values, [f"{name}/rows"], axis=0),
                  helper.make_node("Shape", [values[0]], [f"{name}/row_shape"]), shape,
                  helper.make_node("Reshape", [f"{name}/rows", f"{name}/shape"], [name])]
    return nodes, initializers


def split_rows(src, steps, rows, suffix):
    """Nodes splitting src [S, A, ...] into S rows [A, ...]: src as [S*A, ...], cut every A."""
    p = f"{src}/rows{suffix}"
    c = lambda name, v: helper.make_node("Constant", [], [f"{p}/{name}"], value=numpy_helper.from_array(np.array(v, np.int64)))
    return [c("one", [1]), c("two", [2]), c("end", [np.iinfo(np.int64).max]), c("minus_one", [-1]), c("steps", [steps]),
            helper.make_node("Shape", [src], [f"{p}/shape"]),
            helper.make_node("Slice", [f"{p}/shape", f"{p}/one", f"{p}/two"], [f"{p}/a"]),
            helper.make_node("Slice", [f"{p}/shape", f"{p}/two", f"{p}/end"], [f"{p}/tail"]),
            helper.make_node("Concat", [f"{p}/minus_one", f"{p}/tail"], [f"{p}/flat_shape"], axis=0),
            helper.make_node("Reshape", [src, f"{p}/flat_shape"], [f"{p}/flat"]),
            helper.make_node("Expand", [f"{p}/a", f"{p}/steps"], [f"{p}/sizes"]),
            helper.make_node("Split", [f"{p}/flat", f"{p}/sizes"], rows, axis=0)]


def value_ranks(model):
    """The rank of every outer value whose shape inference knows it, by name."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    return {v.name: len(v.type.tensor_type.shape.dim) for v in list(inferred.input) + list(inferred.value_info)
            if v.type.tensor_type.HasField("shape")}


def gather_axis(node):
    for a in node.attribute:
        if a.name == "axis":
            return helper.get_attribute_value(a)
    return 0


def unroll(model, steps, guided):
    """head_loop.onnx's model with its loop unrolled over `steps` steps for guided (G = 2) or
    unguided (G = 1) runs."""
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # Split's sizes and Squeeze's axes are inputs from opset 13 on
        raise SystemExit(f"head loop graph at opset {opset}: unroll_head.py writes opset 13 or later nodes")
    if [o.name for o in g.output] != OUTPUTS:
        raise SystemExit(f"not a head loop graph: outputs {[o.name for o in g.output]}, want {OUTPUTS}")
    ifs = [n for n in g.node if n.op_type == "If"]
    if len(ifs) != 1 or len(ifs[0].output) != len(OUTPUTS):  # half_pack.py casts its outputs to the graph's
        raise SystemExit("not a head loop graph: want one If node choosing the guided or the unguided loop")
    branch = attr(ifs[0], "then_branch" if guided else "else_branch")
    loops = [n for n in branch.node if n.op_type == "Loop"]
    if len(loops) != 1:
        raise SystemExit(f"head loop branch has {len(loops)} Loop nodes, want 1")
    suffix = "g" if guided else "u"
    at = list(g.node).index(ifs[0])
    nodes, after = list(g.node[:at]), list(g.node[at + 1:])
    for n in branch.node:
        if n is loops[0]:
            inlined, body_inits = inline_loop(n, steps, suffix, value_ranks(model))
            nodes.extend(inlined)
        else:
            nodes.append(n)
    for src, dst in zip(branch.output, ifs[0].output):
        nodes.append(helper.make_node("Identity", [src.name], [dst]))
    nodes += after
    # a weight the outer graph and the loop body both read is in both (loop_weights.py): once here
    initializers = list({t.name: t for t in list(g.initializer) + list(branch.initializer) + body_inits}.values())
    nodes, initializers = drop_unused(nodes, initializers, OUTPUTS)

    halves = 2 if guided else 1
    fixed = {"S": steps, "G": halves}
    inputs = [fix_dims(v, fixed) for v in g.input]
    outputs = [fix_dims(v, fixed) for v in g.output]
    graph = helper.make_graph(nodes, f"head_loop_{suffix}{steps}", inputs, outputs, initializers)
    out = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="marspec unroll_head.py")
    out.ir_version = model.ir_version
    return out


def drop_unused(nodes, initializers, outputs):
    """Nodes and weights nothing leading to the outputs reads (the other branch's casts, the
    trip count, the guidance flag)."""
    needed = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(i for i in n.input if i)
            for a in n.attribute:  # a subgraph reads outer names too
                if a.type == onnx.AttributeProto.GRAPH:
                    needed.update(outer_reads(a.g))
    kept.reverse()
    return kept, [t for t in initializers if t.name in needed]


def outer_reads(graph):
    names = set()
    for n in graph.node:
        names.update(n.input)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names.update(outer_reads(a.g))
    return names


def fix_dims(value, fixed):
    v = onnx.ValueInfoProto()
    v.CopyFrom(value)
    for d in v.type.tensor_type.shape.dim:
        if d.HasField("dim_param") and d.dim_param in fixed:
            d.dim_value = fixed[d.dim_param]
    return v


def unrolled_name(loop_file, steps, guided):
    """head_loop.onnx -> head_loop.guided100.onnx; head_loop.fp16.onnx -> head_loop.fp16.guided100.onnx"""
    stem = loop_file[:-len(".onnx")]
    return f"{stem}.{'guided' if guided else 'unguided'}{steps}.onnx"


def unroll_file(pack, loop_file, steps_list):
    model = onnx.load(os.path.join(pack, loop_file))
    entries = []
    for steps in steps_list:
        for guided in (True, False):
            out = unroll(model, steps, guided)
            name = unrolled_name(loop_file, steps, guided)
            onnx.checker.check_model(out)
            onnx.save(out, os.path.join(pack, name))
            entries.append({"file": name, "steps": steps, "guided": guided})
            print(f"{pack}: {name} ({len(out.graph.node)} nodes)")
    return entries


def add_to_pack(pack, steps_list=None):
    man_path = os.path.join(pack, "manifest.json")
    with open(man_path) as f:
        manifest = json.load(f)
    if not manifest.get("head_loop"):
        raise SystemExit(f"{pack} has no fused head loop: run scripts/packs/fuse_head.py {pack} first")
    steps_list = sorted(set(steps_list or [manifest["diffusion"]["sampling_steps"]]))
    if any(s < 1 for s in steps_list):
        raise SystemExit(f"--steps must be at least 1, got {steps_list}")
    manifest["head_loop"]["unrolled"] = unroll_file(pack, manifest["head_loop"]["file"], steps_list)
    for spec in manifest.get("precisions", {}).values():
        if spec.get("head_loop"):
            spec["head_loop_unrolled"] = unroll_file(pack, spec["head_loop"], steps_list)
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pack")
    p.add_argument("--steps", type=int, action="append", help="diffusion steps to unroll for (repeatable; "
                   "default: the pack's diffusion.sampling_steps)")
    args = p.parse_args(argv)
    manifest = add_to_pack(args.pack, args.steps)
    unrolled = manifest["head_loop"]["unrolled"] + [
        u for spec in manifest.get("precisions", {}).values() for u in spec.get("head_loop_unrolled", [])]
    aligned_weights.align_pack(args.pack, only={u["file"] for u in unrolled})


if __name__ == "__main__":
    main(sys.argv[1:])
