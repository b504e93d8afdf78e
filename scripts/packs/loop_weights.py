"""Where a fused head loop keeps the weights its loop bodies read.

ONNX Runtime re-lays a MatMul/Gemm's constant weight for its CPU kernels once, when the session
opens (pre-packing), but only for a graph's own initializers: a Loop body reading a weight of
the outer graph packs it again at every iteration. At MAR-B's head and one token per AR step
that was most of a step (docs/BENCHMARKS.md, "The fused head on a CPU"). So head_loop.onnx
keeps each weight its bodies read inside each body (the guided and the unguided loop each hold
a copy), and the outer graph keeps those it reads itself. The pack tools that rewrite the graph
(quantize_pack.py, half_pack.py) lift the weights back out first, so they see every weight in
one place, and put them back after.
"""
import onnx


def loop_bodies(model):
    """The Loop bodies inside the fused graph's If branches."""
    for node in model.graph.node:
        if node.op_type != "If":
            continue
        for a in node.attribute:
            if a.type != onnx.AttributeProto.GRAPH:
                continue
            for inner in a.g.node:
                if inner.op_type == "Loop":
                    yield next(b.g for b in inner.attribute if b.name == "body")


def into_bodies(model):
    """Moves the outer weights the loop bodies read into each body; those the outer graph reads
    too stay there as well."""
    bodies = list(loop_bodies(model))
    if not bodies:
        return
    g = model.graph
    weights = {t.name: t for t in g.initializer}
    for body in bodies:
        for name in dict.fromkeys(i for n in body.node for i in n.input if i in weights):
            copy = onnx.TensorProto()
            copy.CopyFrom(weights[name])
            body.initializer.append(copy)
    outer_reads = {i for n in g.node for i in n.input}
    owned = {t.name for body in bodies for t in body.initializer}
    kept = [t for t in g.initializer if t.name not in owned or t.name in outer_reads]
    del g.initializer[:]
    g.initializer.extend(kept)


def out_of_bodies(model):
    """The inverse: every body weight back in the outer graph, once."""
    g = model.graph
    have = {t.name for t in g.initializer}
    for body in loop_bodies(model):
        for t in body.initializer:
            if t.name not in have:
                g.initializer.append(t)
                have.add(t.name)
        del body.initializer[:]
