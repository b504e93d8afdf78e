"""Build head_loop.onnx: a pack's whole reverse diffusion as one ONNX call.

  /usr/bin/python3 scripts/fuse_head.py models/target [models/draft ...]

Reads PACK/head.onnx, writes PACK/head_loop.onnx and adds the optional "head_loop" entry to
PACK/manifest.json (docs/model-pack.md has the graph's inputs and outputs). The graph is an
ONNX Loop over the sampling steps whose body runs the head once over the cond (and uncond)
rows and then the sampler step of diffusion/ (Posterior + Step): everything random and every
schedule coefficient comes in as an input, so one graph serves every step count, guidance
scale, temperature and clipping setting. The sampler arithmetic is done in float64, in the
same order of operations as the Go code, so both paths agree to rounding.

Parts of the head that do not change between steps are moved out of the loop: the
conditioning projection of z (once per call) and the timestep embedding (once per step, for
all steps together, then one row per iteration). Needs only the onnx and numpy packages.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FORMAT = "marspec-head-loop/1"
# Columns of the coef input, one row per iteration (docs/model-pack.md).
COEFS = ["sqrt_recip_acp", "sqrt_recip_m1_acp", "coef1", "coef2", "log_beta", "post_log_var", "noise_on"]
INT64_MAX = np.iinfo(np.int64).max
# Ops that act row by row, so the timestep-only part of the head may run over all S steps at once.
ROWWISE = {"Unsqueeze", "Cast", "Mul", "Add", "Sub", "Div", "Cos", "Sin", "Sigmoid", "Gemm", "Concat", "Constant"}
BROADCASTING = {"Add", "Mul", "Sub", "Div"}


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


class Builder:
    """Collects nodes with fresh names."""

    def __init__(self, prefix):
        self.prefix, self.nodes, self.count = prefix, [], 0

    def op(self, op_type, inputs, n_out=1, **attrs):
        self.count += 1
        outs = [f"{self.prefix}{op_type}_{self.count}_{k}" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype):
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def fuse(head, dim, width):
    g = head.graph
    names = [i.name for i in g.input]
    if names != ["x_t", "t", "z"] or [o.name for o in g.output] != ["out"]:
        raise SystemExit(f"head.onnx has inputs {names} and outputs {[o.name for o in g.output]}, want x_t, t, z -> out")
    deps = dependencies(g, ["x_t", "t", "z"])
    const_nodes = [n for n in g.node if n.op_type == "Constant"]
    z_only = [n for n in g.node if n.op_type != "Constant" and deps[n.output[0]] == {"z"}]
    t_only = [n for n in g.node if n.op_type != "Constant" and deps[n.output[0]] == {"t"}]
    body_nodes = [n for n in g.node if n.op_type != "Constant" and n not in z_only and n not in t_only]
    for n in t_only:
        if n.op_type not in ROWWISE or (n.op_type == "Concat" and helper.get_attribute_value(n.attribute[0]) not in (-1, 1)):
            raise SystemExit(f"timestep part of the head has a {n.op_type} node: cannot precompute it per step")
    t_frontier = {i for n in body_nodes for i in n.input if deps.get(i) == {"t"} and i != "t"}
    for n in body_nodes:
        if "t" in n.input:
            raise SystemExit("a loop-dependent node reads t directly: cannot precompute the timestep embedding")
        if any(i in t_frontier for i in n.input) and n.op_type not in BROADCASTING:
            raise SystemExit(f"timestep embedding feeds a {n.op_type} node: it must broadcast over rows")

    outer = Builder("outer/")
    # z arrives as [G, N, W] (G = 2 under guidance: cond rows then uncond rows).
    zshape = outer.op("Shape", ["z"])
    g_n = outer.op("Slice", [zshape, outer.const([0], np.int64), outer.const([2], np.int64)])
    zflat = outer.op("Reshape", ["z", outer.const([-1, width], np.int64)])
    n_rows = outer.op("Slice", [zshape, outer.const([1], np.int64), outer.const([2], np.int64)])
    g_rep = outer.op("Concat", [outer.op("Slice", [zshape, outer.const([0], np.int64), outer.const([1], np.int64)]),
                                outer.const([1], np.int64)], axis=0)  # Tile repeats [G, 1]
    neg_n = outer.op("Neg", [n_rows])
    d_c, d2_c, zero_c, max_c = (outer.const([dim], np.int64), outer.const([2 * dim], np.int64),
                                outer.const([0], np.int64), outer.const([INT64_MAX], np.int64))
    cond_eps_s = (outer.op("Concat", [zero_c, zero_c], axis=0), outer.op("Concat", [n_rows, d_c], axis=0))
    cond_v_s = (outer.op("Concat", [zero_c, d_c], axis=0), outer.op("Concat", [n_rows, d2_c], axis=0))
    unc_eps_s = (outer.op("Concat", [neg_n, zero_c], axis=0), outer.op("Concat", [max_c, d_c], axis=0))
    trips = outer.op("Gather", [outer.op("Shape", ["coef"]), outer.const(0, np.int64)], axis=0)
    lo, hi = outer.op("Split", ["clip"], n_out=2, axis=0)
    del g_n

    def rename(nodes, mapping):
        out = []
        for n in nodes:
            m = onnx.NodeProto()
            m.CopyFrom(n)
            m.input[:] = [mapping.get(i, i) for i in n.input]
            out.append(m)
        return out

    # z-only and t-only parts run once in the outer graph; t becomes the [S] vector of steps.
    hoisted = rename(const_nodes, {}) + rename(z_only, {"z": zflat}) + rename(t_only, {"t": "t"})

    body = Builder("body/")
    it = "iter"
    idx1 = body.op("Unsqueeze", [it, body.const([0], np.int64)])
    mapping = {}
    for name in sorted(t_frontier):
        mapping[name] = body.op("Gather", [name, idx1], axis=0)  # [1, width]: broadcasts over rows
    xf = body.op("Cast", ["x_in"], to=TensorProto.FLOAT)
    mapping["x_t"] = body.op("Tile", [xf, g_rep])
    head_body = rename(body_nodes, mapping)
    body.nodes.extend(head_body)
    out = "out"
    starts_ax = body.const([0, 1], np.int64)
    eps_c = body.op("Slice", [out, cond_eps_s[0], cond_eps_s[1], starts_ax])
    v = body.op("Slice", [out, cond_v_s[0], cond_v_s[1], starts_ax])
    eps_u = body.op("Slice", [out, unc_eps_s[0], unc_eps_s[1], starts_ax])
    f64 = TensorProto.DOUBLE
    c64, u64 = body.op("Cast", [eps_c], to=f64), body.op("Cast", [eps_u], to=f64)
    # diffusion.GuidedEpsilon: uncond + scale*(cond - uncond) in float64, rounded once to float32.
    # Unguided (G = 1) the uncond rows are the cond rows and this is exactly eps.
    guided = body.op("Add", [u64, body.op("Mul", ["cfg", body.op("Sub", [c64, u64])])])
    eps = body.op("Cast", [body.op("Cast", [guided], to=TensorProto.FLOAT)], to=f64)
    row = body.op("Gather", ["coef", it], axis=0)
    a, b, c1, c2, lb, plv, noise_on = body.op("Split", [row], n_out=7, axis=0)
    # diffusion.Schedule.Posterior
    x0 = body.op("Sub", [body.op("Mul", [a, "x_in"]), body.op("Mul", [b, eps])])
    x0 = body.op("Max", [body.op("Min", [x0, hi]), lo])
    mean = body.op("Add", [body.op("Mul", [c1, x0]), body.op("Mul", [c2, "x_in"])])
    one, two, half = body.const([1.0], np.float64), body.const([2.0], np.float64), body.const([0.5], np.float64)
    frac = body.op("Div", [body.op("Add", [body.op("Cast", [v], to=f64), one]), two])
    lv = body.op("Add", [body.op("Add", [body.op("Mul", [frac, lb]), body.op("Mul", [body.op("Sub", [one, frac]), plv])]),
                         "temp_log"])
    # diffusion.Schedule.Step; noise_on is 0 on a last step without noise, and mean + 0 = mean.
    noise = body.op("Gather", ["noise", it], axis=0)
    x_next = body.op("Add", [mean, body.op("Mul", [body.op("Mul", [body.op("Exp", [body.op("Mul", [half, lv])]), noise]),
                                                   noise_on])])
    body.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body.nodes.append(helper.make_node("Identity", [x_next], ["x_out"]))
    body.nodes.append(helper.make_node("Identity", [mean], ["mean_out"]))
    body.nodes.append(helper.make_node("Identity", [lv], ["lv_out"]))
    nd = ["N", dim]
    body_graph = helper.make_graph(
        body.nodes, "step",
        [helper.make_tensor_value_info(it, TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", f64, nd),
         helper.make_tensor_value_info("mean_in", f64, nd)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", f64, nd),
         helper.make_tensor_value_info("mean_out", f64, nd),
         helper.make_tensor_value_info("lv_out", f64, nd)])
    loop = helper.make_node("Loop", [trips, "", "x_T", "x_T"], ["x0", "last_mean", "log_var"], body=body_graph)
    inputs = [
        helper.make_tensor_value_info("x_T", f64, ["N", dim]),
        helper.make_tensor_value_info("noise", f64, ["S", "N", dim]),
        helper.make_tensor_value_info("z", TensorProto.FLOAT, ["G", "N", width]),
        helper.make_tensor_value_info("cfg", f64, ["N", 1]),
        helper.make_tensor_value_info("t", TensorProto.FLOAT, ["S"]),
        helper.make_tensor_value_info("coef", f64, ["S", len(COEFS)]),
        helper.make_tensor_value_info("temp_log", f64, [1]),
        helper.make_tensor_value_info("clip", f64, [2]),
    ]
    outputs = [
        helper.make_tensor_value_info("x0", f64, ["N", dim]),
        helper.make_tensor_value_info("last_mean", f64, ["N", dim]),
        helper.make_tensor_value_info("log_var", f64, ["S", "N", dim]),
    ]
    graph = helper.make_graph(outer.nodes + hoisted + [loop], "head_loop", inputs, outputs, list(g.initializer))
    model = helper.make_model(graph, opset_imports=list(head.opset_import), producer_name="marspec fuse_head.py")
    model.ir_version = head.ir_version
    onnx.checker.check_model(model, full_check=True)
    return model


def main(packs):
    if not packs:
        raise SystemExit(__doc__)
    for pack in packs:
        man_path = os.path.join(pack, "manifest.json")
        with open(man_path) as f:
            manifest = json.load(f)
        head = onnx.load(os.path.join(pack, "head.onnx"))
        model = fuse(head, manifest["token_dim"], manifest["width"])
        onnx.save(model, os.path.join(pack, "head_loop.onnx"))
        manifest["head_loop"] = {"file": "head_loop.onnx", "format": FORMAT}
        with open(man_path, "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        print(f"{pack}: head_loop.onnx ({len(model.graph.node)} outer nodes, "
              f"{len(model.graph.node[-1].attribute[0].g.node)} per step)")


if __name__ == "__main__":
    main(sys.argv[1:])
