"""Moves the weights of a pack's large graphs into a file beside each graph, every tensor at a
page-aligned offset, so that ONNX Runtime maps them from the file instead of copying them.

  /usr/bin/python3 scripts/packs/aligned_weights.py PACK [--min-mb 64]

Why: opening a graph whose weights are inside the .onnx file costs a copy of every weight per
stage (the file read, the parsed protobuf, the session's initialisers) before the pre-packed
copy the matrix kernels use, and each copy touches fresh memory. With the weights in
NAME.onnx.data at offsets that are multiples of 64 KiB, ONNX Runtime maps the file (CPU only,
offsets aligned to the allocation granularity) and copies each weight once, when it packs it.
At MAR-B (transformer 689 MB, head 143 MB, decoder 153 MB) opening went from 6.5-8.3 s to
3.9-4.0 s on two cores, and the peak memory while opening from 1.7-1.8 GB to 1.0-1.1 GB
(docs/BENCHMARKS.md, "Start-up").

Every graph marspec opens by path (the transformer, the cached transformer, the head and its
fused loop, at every precision, and the decoder) of at least --min-mb MB is rewritten in place: NAME.onnx keeps the nodes, NAME.onnx.data
the weights. A graph already in that form is rewritten the same way (its weights read back
first), so running the tool twice changes nothing. marspec reads both forms; the tools that
change graphs (quantize_pack.py, half_pack.py, fuse_head.py, unroll_head.py) read both and call
this at the end on the graphs they wrote.
"""
import argparse
import json
import os
import sys

try:  # imported as packs.NAME, or run as a script from scripts/packs
    from packs import loop_weights
except ImportError:
    import loop_weights

ALIGN = 64 << 10  # ONNX Runtime maps an external tensor when its offset is a multiple of this
SMALL = 1024  # tensors under this many bytes stay in the graph


def data_file(graph):
    return graph + ".data"


def write_aligned(model, path):
    """Saves model to path with its initialisers of SMALL bytes or more in path.data, each at an
    offset that is a multiple of ALIGN, a fused head's loop bodies' own tensors included: the
    guided and the unguided body hold the same weights (loop_weights.py), written once and named
    by both. model's tensors must hold their bytes (onnx.load reads external data back by
    default)."""
    import onnx
    from onnx import TensorProto, numpy_helper
    location = os.path.basename(data_file(path))
    tmp = data_file(path) + ".tmp"
    offset = 0
    written = {}  # tensor name -> (offset, length)
    tensors = list(model.graph.initializer)
    for body in loop_weights.loop_bodies(model):
        tensors += list(body.initializer)
    with open(tmp, "wb") as out:
        for t in tensors:
            if t.data_location == TensorProto.EXTERNAL:
                raise ValueError(f"{path}: tensor {t.name} still external: load the model with its data first")
            raw = t.raw_data if t.HasField("raw_data") else numpy_helper.to_array(t).tobytes()
            if len(raw) < SMALL:
                continue
            if t.name not in written:
                pad = -offset % ALIGN
                out.write(b"\0" * pad)
                offset += pad
                out.write(raw)
                written[t.name] = (offset, len(raw))
                offset += len(raw)
            at, length = written[t.name]
            for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
                t.ClearField(field)
            t.ClearField("raw_data")
            del t.external_data[:]
            for key, value in (("location", location), ("offset", str(at)), ("length", str(length))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            t.data_location = TensorProto.EXTERNAL
    onnx.save(model, path)
    os.replace(tmp, data_file(path))


def graph_bytes(pack, name):
    path = os.path.join(pack, name)
    size = os.path.getsize(path)
    if os.path.exists(data_file(path)):
        size += os.path.getsize(data_file(path))
    return size


def pack_graphs(manifest):
    """The graph files marspec opens by path (so ONNX Runtime finds the weights beside them):
    the transformer, the cached transformer, the head and its fused loop (rolled and unrolled) at every precision,
    and the decoder. The small graphs it reads as bytes (early exit, distilled head) stay whole."""
    names = ["transformer.onnx", "head.onnx"]
    for key in ("head_loop", "cache"):
        if manifest.get(key):
            names.append(manifest[key]["file"])
    names.extend(u["file"] for u in (manifest.get("head_loop") or {}).get("unrolled", []))
    if manifest.get("tokenizer", {}).get("graph"):
        names.append(manifest["tokenizer"]["graph"])
    for spec in manifest.get("precisions", {}).values():
        names.extend(spec[key] for key in ("transformer", "head", "head_loop", "transformer_cached") if spec.get(key))
        names.extend(u["file"] for u in spec.get("head_loop_unrolled", []))
    return list(dict.fromkeys(names))


def align_pack(pack, min_mb=64, log=sys.stderr, only=None):
    """Rewrites the pack's graphs of min_mb MB or more with aligned external weights: all of
    them, or those named in only (a tool's new graphs: rewriting the others again changes
    nothing and costs seconds per large graph, about 12 s for MAR-B's on two cores)."""
    import onnx
    with open(os.path.join(pack, "manifest.json")) as f:
        manifest = json.load(f)
    done = []
    for name in pack_graphs(manifest):
        if only is not None and name not in only:
            continue
        path = os.path.join(pack, name)
        if not os.path.exists(path) or graph_bytes(pack, name) < min_mb * 1e6:
            continue
        write_aligned(onnx.load(path), path)
        done.append(name)
        print(f"{path}: weights in {os.path.basename(data_file(path))} "
              f"({os.path.getsize(data_file(path)) / 1e6:.1f} MB, aligned to {ALIGN // 1024} KiB)", file=log)
    return done


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pack")
    ap.add_argument("--min-mb", type=float, default=64,
                    help="rewrite graphs of at least this many MB with their weights (default 64; 0: every graph)")
    args = ap.parse_args(argv)
    if not os.path.exists(os.path.join(args.pack, "manifest.json")):
        raise SystemExit(f"{args.pack}: not a model pack (no manifest.json)")
    if not align_pack(args.pack, args.min_mb):
        print(f"{args.pack}: no graph of {args.min_mb:g} MB or more; nothing to do", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
