"""gpu_mar.py's ratio rows on a device whose ONNX Runtime fails in SkipLayerNormalization: the
pack's fp16 graphs are made again with half_pack.py --plain-norms, once, and the rows tried again;
any other failure converts nothing. The rows are stand-ins that fail as a device would.

  /usr/bin/python3 test_gpu_plain_norms.py PACK OUT   (PACK: fp16 graphs, head loop unrolled)
"""
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
import gpu_mar  # noqa: E402

SKIP_FAILURE = "Non-zero status code returned while running SkipLayerNormalization node. Name:'n/skip_ln@g0'"


def skip_norms_in(pack):
    with open(os.path.join(pack, "head_loop.fp16.guided100.onnx"), "rb") as f:
        return f.read().count(b"SkipLayerNormalization")


def main(pack, out):
    args = types.SimpleNamespace(out=out, deadline=time.time() + 300, python=sys.executable, pack=pack, steps=100, official=None)
    run = gpu_mar.Run(args)
    run.report = lambda: None  # the report wants the whole run's arguments
    run.official_row = lambda kind, batch: None
    assert skip_norms_in(pack) > 0, "the pack's fp16 head holds no SkipLayerNormalization to begin with"

    tried = []

    def other_failure(precision, head, batch, pack=None, key=None):
        tried.append(head)
        return {"error": "CUDA failure 2: out of memory"}
    run.marspec_row = other_failure
    run.ratio_rows(64)
    assert tried == ["graph", "fused", "rolled"], tried
    assert "pack/fp16-plain-norms" not in run.results and skip_norms_in(pack) > 0, "converted on another failure"

    tried.clear()

    def skip_failure(precision, head, batch, pack=None, key=None):
        tried.append(head)
        converted = "pack/fp16-plain-norms" in run.results
        return {"stats": {}} if converted and head == "graph" else {"error": SKIP_FAILURE}
    run.marspec_row = skip_failure
    run.ratio_rows(8)
    assert tried == ["graph", "fused", "rolled", "graph"], tried
    assert "stats" in run.results["pack/fp16-plain-norms"], run.results["pack/fp16-plain-norms"]
    assert skip_norms_in(pack) == 0, "the fp16 head still holds SkipLayerNormalization"

    tried.clear()
    run.marspec_row = lambda precision, head, batch, pack=None, key=None: (tried.append(head), {"error": SKIP_FAILURE})[1]
    run.ratio_rows(8)  # converted already: the rows are tried once, nothing made again
    assert tried == ["graph", "fused", "rolled"] * 2, tried
    print("ok: another failure converts nothing; SkipLayerNormalization's converts once and the replayed row runs")


if __name__ == "__main__":
    main(*sys.argv[1:3])
