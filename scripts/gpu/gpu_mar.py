"""The MAR-B device run: random-weight MAR-B at num_iter 64, 100 diffusion steps, cfg 2.9,
batch 1, 8 and 64, marspec against the official MAR code, in one command that stops starting
work after 8 minutes (scripts/gpu/gpu_bench.sh runs it; docs/gpu.md says how on a lent GPU).

Stages in priority order, each with a budget of seconds (a stage stops starting measurements,
and its running one is cut, when its budget or the run's deadline is spent; what it did not
reach is listed as not measured):

  pack           make the random MAR-B pack with its official-layout checkpoint (and
                 head_loop.onnx, transformer_cached.onnx); add fp16 graphs with
                 scripts/packs/half_pack.py where that tool exists, then the fused head
                 unrolled for the run's step count (scripts/packs/unroll_head.py)
  ratio-b8       official code under bf16 autocast; marspec fp16, fused head unrolled and
                 replayed as CUDA graphs (MARSPEC_CUDA_GRAPH=on), without the cache (the
                 unrolled graph without replay, then the rolled loop, where that row fails)
  ratio-b64      the same at batch 64
  parity         fp16 against fp32 images (same seed, fused head), and the CUDA graph replay
                 against the same head without it, against PARITY_* below
  parity-trained fp16 against fp32 images of the embedded target, a trained head (random MAR-B's
                 tokens outgrow any meaning), with the head's residual stream fp32 and fp16
  kernels        the unrolled fp16 head (fp32 on the CPU) as ONNX Runtime runs it, after its own fusions
                 (MARSPEC_ORT_OPTIMIZED_DIR): nodes per diffusion step by op type, the kernels a
                 step launches (the pack tools count nodes before those fusions)
  head-kinds     marspec fp16 fused head as the unrolled graph without replay and as the rolled
                 ONNX Loop, batch 8 and 64
  cache          marspec fp16, the graph row with the cache (its K/V cross the host every call)
  fp32           marspec fp32, the graph row, batch 8 and 64
  official-fp32  the official code in fp32 at batch 8 and 64
  per-step       marspec fp16 and fp32, the head one call per diffusion step, batch 8 and 64
  batch-1        the ratio rows and the rest at batch 1
  energy-head    scripts/gpu/gpu_energy_head.sh with the minutes left (at least 1)

marspec's rows are `marspec bench --parts --json` (images/s of generation and decoding after
one untimed round, the whole batch on a GPU, and the share of the wall time spent in head calls: the head's share); the
official code's are scripts/bench/official_mar_bench.py (after one untimed image at 4 AR steps).
--tiny runs the same stages on the CPU at toy sizes (test_small, 8 AR steps, 5 diffusion steps,
batches 1, 2, 4 for 1, 8, 64): the check `make test` runs (scripts/tests/gpu_mar_test.go); there
fp16 is refused by design and bf16 autocast is probed, so both are recorded as skipped with
their reasons.

Every outcome is one line of OUT/results.jsonl keyed by what it measured; a rerun skips the
measured ones (and tries cut, failed and skipped ones again), so a run cut off goes on where it
stopped. OUT/gpu-mar.md, the section for docs/, is rewritten after each line.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)  # scripts/: imports name their folder (scripts/README.md)
from gpu.gpu_bench import official_command  # noqa: E402
from gpu.gpu_mar_report import write_report  # noqa: E402
from gpu.gpu_stages import clip  # noqa: E402
from lib.pngfile import read_png  # noqa: E402

# Stated before any fp16 run: fp16 images (fused head, same seed) against fp32 must have, per
# image, a mean |difference| of at most 2 grey levels of 255 and 99% of pixels within 8 levels.
# The noise is drawn in Go, the same for both; only rounding differs, and a sampled token feeds
# the next AR step, so differences may grow along the 64 steps: the worst image is reported.
PARITY_MEAN_LEVELS, PARITY_PIXEL_LEVELS, PARITY_SHARE = 2.0, 8, 0.99

# (name, budget in seconds on an H100/H200): the order is the priority
# (the run of 2026-11-27 on an H200: the ratio rows ran the cache, whose K/V cross the host at
# every call, 60% of a generation there; and 35 s did not hold two generations for parity)
STAGES = [("pack", 120), ("ratio-b8", 90), ("ratio-b64", 110), ("parity", 75), ("parity-trained", 45), ("kernels", 40), ("head-kinds", 80), ("cache", 50),
          ("fp32", 60), ("official-fp32", 70), ("per-step", 60), ("batch-1", 60), ("stream", 75), ("pick", 50),
          ("cache-kv", 40), ("energy-head", 0)]  # energy-head: whatever is left
# head -> (bench flags, environment): "fused" is the unrolled graph where the pack has one for
# the run's steps (the pack stage makes it), "rolled" the ONNX Loop, "graph" the unrolled graph
# replayed as CUDA graphs (docs/gpu.md)
UNROLLED, ROLLED = {"MARSPEC_HEAD_UNROLLED": "on"}, {"MARSPEC_HEAD_UNROLLED": "off"}
REPLAYED = {**UNROLLED, "MARSPEC_CUDA_GRAPH": "on"}
HEADS = {"per-step": ([], {}), "fused": (["--fused-head"], UNROLLED), "graph": (["--fused-head"], REPLAYED),
         "rolled": (["--fused-head"], ROLLED), "graph+cache": (["--fused-head", "--cache"], REPLAYED)}
PRECISIONS = ("fp16", "fp32")


class Run:
    def __init__(self, args):
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.results_path = os.path.join(args.out, "results.jsonl")
        self.results = {}
        if os.path.exists(self.results_path):
            with open(self.results_path) as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        self.results[r["key"]] = r  # later lines replace earlier ones
        self.deadline = args.deadline
        self.stage_end = self.deadline
        self.stage = ("", 0)  # the stage running: name, budget
        self.not_started = 0  # measurements the running stage had no time left to start
        self.stage_log = {}
        self.tried = set()  # keys this run's stages reached, measured or not (the report's cells)
        self.stage_budgets, self.parity_tolerance = STAGES, (PARITY_MEAN_LEVELS, PARITY_PIXEL_LEVELS, PARITY_SHARE)  # stage -> {"budget", "seconds", "status"}
        self.work = tempfile.mkdtemp(prefix="gpu-mar-")
        self.fp16_reason = None  # why fp16 rows are skipped, once known
        self.bf16_reason = None  # why the official bf16 rows are skipped, once known
        self.marspec_reason = None  # why no marspec row can run (the preflight's failure), once known
        self.made = {}  # folders this run finished writing (generated images, converted packs), by name

    # ---- bookkeeping ----

    def left(self):
        return min(self.stage_end, self.deadline) - time.time()

    def keep(self, key, rec):
        rec = {"key": key, **rec}
        self.results[key] = rec
        with open(self.results_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.report()
        return rec

    def measured(self, key):
        return "stats" in self.results.get(key, {})

    def measure(self, key, fn, need=10):
        """Runs fn for key unless measured; a skip, a cut or a failure is recorded, not fatal."""
        self.tried.add(key)
        if self.measured(key):
            return self.results[key]
        if self.left() < need:
            self.not_started += 1  # reported as not measured: the stage's budget is spent
            return None
        print(f"gpu_mar: {key}", file=sys.stderr, flush=True)
        try:
            return self.keep(key, fn())
        except subprocess.TimeoutExpired:
            name, budget = self.stage
            return self.keep(key, {"cut": f"cut at the end of stage {name}'s {budget or 'remaining'} s or the run's deadline"})
        except Skip as s:
            return self.keep(key, {"skipped": str(s)})
        except Exception as e:  # noqa: BLE001: one failed measurement must not lose the others
            traceback.print_exc()
            return self.keep(key, {"error": str(e)[-800:]})

    def command(self, cmd, env=None):
        """Runs cmd until the stage's time is up; its whole process group is ended then (a
        script's children too, which would otherwise hold the output pipes open)."""
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env=dict(os.environ, **(env or {})), start_new_session=True)
        try:
            out, err = p.communicate(timeout=max(self.left(), 1))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise
        if p.returncode != 0:
            raise RuntimeError(f"{os.path.basename(cmd[0])} {' '.join(cmd[1:3])} failed ({p.returncode}): {clip(err, 600)}")
        return out

    def once(self, name, make):
        """The folder work/name, made by make(folder) unless this run finished it already (a
        cut or failed make leaves a folder that is not reused)."""
        if name not in self.made:
            folder = os.path.join(self.work, name)
            make(folder)
            self.made[name] = folder
        return self.made[name]

    def half_unrolled(self, pack, flags, steps=None, out=None):
        """half_pack.py PACK FLAGS (into out, a new folder, when given), then unroll_head.py on
        the pack it wrote (for steps, else the pack's own step count)."""
        a, py = self.args, {"PYTHONWARNINGS": "ignore"}
        self.command([a.python, os.path.join(SCRIPTS, "packs", "half_pack.py"), pack, *flags, *(["--out", out] if out else [])], py)
        self.command([a.python, os.path.join(SCRIPTS, "packs", "unroll_head.py"), out or pack,
                      *(["--steps", str(steps)] if steps else [])], py)

    def half_copy(self, name, source, stream, steps=None):
        """work/name: a copy of pack source with its fp16 graphs made by half_pack.py with the
        head's residual stream `stream`, then unrolled (for steps, else the pack's own count);
        made once per run."""
        def make(out):
            shutil.rmtree(out, ignore_errors=True)  # half_pack.py --out wants a new folder
            self.half_unrolled(source, ["--head-stream", stream], steps, out)
        return self.once(name, make)

    def generated(self, name, argv, env=None):
        """Images of `marspec generate ARGV` in work/name, generated once per run."""
        return self.once(name, lambda out: self.marspec(
            ["generate", *argv, "--json", "--quiet", "--grid", "none", "--out", out], env))

    def marspec(self, argv, env=None):
        a = self.args
        cmd = [a.bin, *argv, "--device", a.device]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        return self.command(cmd, env)

    # ---- the measurements ----

    def marspec_row(self, precision, head, batch, pack=None, key=None, env=None):
        """One bench row; pack (default: the run's) and key for rows of another pack, env for
        rows with other settings (timing rows)."""
        def fn():
            self.need_marspec(precision)
            a = self.args
            argv = ["bench", "--parts", "--json", "--target", pack() if pack else a.pack, "--images", str(batch), "--batch", str(batch),
                    "--num-iter", str(a.num_iter), "--steps", str(a.steps), "--cfg", str(a.cfg), "--rounds", "1",
                    "--precision", precision, *HEADS[head][0]]
            env_ = {**HEADS[head][1], **(env or {})}
            return {"argv": argv, "env": env_, "stats": json.loads(self.marspec(argv, env_).strip().splitlines()[-1])}
        return self.measure(key or f"marspec/{precision}/{head}/b{batch}", fn)

    def official_row(self, kind, batch):
        def fn():
            a = self.args
            if not a.official:
                raise Skip("no copy of the official MAR code (--official DIR, or out/official-mar: docs/gpu.md)")
            if kind == "bf16" and self.bf16_reason:
                raise Skip(self.bf16_reason)
            cmd = official_command(a.python, a.official, a.model, a.vae, a.pack, batch, batch, a.num_iter, a.steps, a.device)
            cmd += ["--cfg", str(a.cfg), "--warmup", "1", "--warmup-num-iter", "4", "--autocast", "bf16" if kind == "bf16" else "off"]
            if a.threads:
                cmd += ["--threads", str(a.threads)]
            out = self.command(cmd, {"PYTHONWARNINGS": "ignore"}).strip().splitlines()
            stats = json.loads(out[-1]) if out and out[-1].startswith("{") else {"skipped": "no JSON line from official_mar_bench.py"}
            if "skipped" in stats:
                if kind == "bf16":
                    self.bf16_reason = stats["skipped"]
                raise Skip(stats["skipped"])
            return {"argv": cmd[2:], "stats": stats}
        return self.measure(f"official/{kind}/b{batch}", fn, need=20)

    def need_marspec(self, precision):
        if self.marspec_reason:
            raise Skip(self.marspec_reason)
        if precision == "fp16" and self.fp16_reason:
            raise Skip(self.fp16_reason)

    def preflight(self):
        """One small image of the embedded target on the device first: a runtime that cannot
        start there costs seconds, and its words stand in every marspec row (the official
        rows still run). Its AR steps after the first hand back only the picked rows of a
        pass (IO binding, untried on a GPU so far): if that is what fails, every later marspec
        command runs with MARSPEC_PICK_ROWS=off, the whole pass's output copied instead."""
        for attempt in range(2):
            try:
                self.marspec(["generate", "--model", "target", "--class", "0", "--n", "1", "--num-iter", "4", "--steps", "5",
                              "--json", "--quiet", "--grid", "none", "--out", os.path.join(self.work, f"preflight{attempt}")])
                return
            except Exception as e:  # noqa: BLE001
                if attempt == 0 and "MARSPEC_PICK_ROWS" in str(e) and os.environ.get("MARSPEC_PICK_ROWS") != "off":
                    os.environ["MARSPEC_PICK_ROWS"] = "off"
                    self.keep("preflight/pick-rows-off", {"error": str(e)[-800:],
                                                          "note": "picking rows failed on the device: MARSPEC_PICK_ROWS=off from here on"})
                    continue
                self.marspec_reason = "marspec cannot run on the device: " + " ".join(str(e).split())[:300]
                self.keep("preflight", {"error": str(e)[-800:]})
                return

    # ---- stages ----

    def stage_pack(self):
        a = self.args
        done = a.pack + ".done"
        making = a.pack + ".making"  # left by a call that started making the pack early (docs/gpu.md)
        while os.path.exists(making) and not os.path.exists(done) and self.left() > 5:
            time.sleep(2)

        def make():
            if os.path.exists(os.path.join(a.pack, "manifest.json")) and os.path.exists(done):
                return {"stats": {"seconds": 0, "note": "made before"}}
            start = time.time()
            self.command([a.python, os.path.join(SCRIPTS, "packs", "make_random_packs.py"), "--models", a.model,
                          "--vae", a.vae, "--out", a.packs, "--checkpoint", "--force"], {"PYTHONWARNINGS": "ignore"})
            open(done, "w").close()
            return {"stats": {"seconds": round(time.time() - start, 1)}}
        rec = self.measure("pack/fp32", make)
        if not rec or "stats" not in rec:
            sys.exit(f"gpu_mar: no {a.model} pack: {rec}")

        def half():
            tool = os.path.join(SCRIPTS, "packs", "half_pack.py")
            if not os.path.exists(tool):
                raise Skip("scripts/packs/half_pack.py is not on this branch")
            start = time.time()
            self.command([a.python, tool, a.pack], {"PYTHONWARNINGS": "ignore"})
            stats = {"seconds": round(time.time() - start, 1)}
            if a.device == "cpu":
                # the pack has the graphs (the tool ran), but marspec refuses fp16 off CUDA
                return {"stats": stats, "note": "fp16 graphs added; fp16 runs are refused on the CPU by design"}
            return {"stats": stats}
        rec = self.measure("pack/fp16", half)
        if a.device == "cpu":
            self.fp16_reason = "fp16 is refused on the CPU by design (CUDA only)" + (
                "" if rec and "stats" in rec else f"; and {(rec or {}).get('skipped') or (rec or {}).get('error') or 'no fp16 pack'}")
        elif not rec or "stats" not in rec:
            self.fp16_reason = (rec or {}).get("skipped") or "no fp16 graphs: " + ((rec or {}).get("error") or "half_pack.py was not reached")

        def unroll():  # after half_pack.py, so the fp16 head loop is unrolled too
            start = time.time()
            self.command([a.python, os.path.join(SCRIPTS, "packs", "unroll_head.py"), a.pack, "--steps", str(a.steps)],
                         {"PYTHONWARNINGS": "ignore"})
            return {"stats": {"seconds": round(time.time() - start, 1)}}
        self.measure("pack/unrolled", unroll)

    def ratio_rows(self, batch):
        self.official_row("bf16", batch)
        for attempt in range(2):
            errors = []
            for head in ("graph", "fused", "rolled"):  # the next where a row fails on the device
                rec = self.marspec_row("fp16", head, batch)
                if not rec or "error" not in rec:
                    return
                errors.append(rec["error"])
            # ONNX Runtime's own SkipLayerNormalization is in every fp16 fused head (half_head.skip_norms):
            # were it what failed on this device, the pack's fp16 graphs are made again without it, once
            if attempt or not any("SkipLayerNormalization" in e for e in errors) or not self.plain_norms():
                return

    def plain_norms(self):
        """The run's pack with fp16 graphs made by half_pack.py --plain-norms, unrolled again."""
        a = self.args

        def fn():
            start = time.time()
            self.half_unrolled(a.pack, ["--plain-norms"], a.steps)
            return {"stats": {"seconds": round(time.time() - start, 1)},
                    "note": "the fp16 rows failed in SkipLayerNormalization: fp16 graphs made again with --plain-norms"}
        rec = self.measure("pack/fp16-plain-norms", fn, need=40)
        return bool(rec) and "stats" in rec

    def fast(self):
        """The precision of the rows that compare head paths: fp16, the fastest on a GPU; fp32
        on the CPU, which refuses fp16."""
        return "fp32" if self.args.device == "cpu" else "fp16"

    def stage_parity(self):
        a = self.args
        b = a.batches[1]

        def images(precision, env):
            self.need_marspec(precision)
            return self.generated(f"parity-{precision}-" + "-".join(f"{k}={v}" for k, v in sorted(env.items())),
                                  ["--model", a.pack, "--class", ",".join(str(c) for c in range(b)), "--n", "1", "--batch",
                                   str(b), "--num-iter", str(a.num_iter), "--steps", str(a.steps), "--cfg", str(a.cfg),
                                   "--seed", "5", "--precision", precision], env)

        fused = {"MARSPEC_HEAD_LOOP": "on"}

        def fp16():
            self.need_marspec("fp16")
            return {"stats": compare_folders(images("fp32", fused), images("fp16", fused))}
        self.measure("parity/fp16-vs-fp32", fp16)
        # a replay reads and writes the addresses its capture saw: wrong buffers would show here
        self.measure("parity/graph-vs-plain", lambda: {"stats": compare_folders(
            images(self.fast(), fused), images(self.fast(), {**fused, "MARSPEC_CUDA_GRAPH": "on"}))})
        if a.tiny:
            # the comparison itself, where fp16 cannot run: two head paths that must agree
            self.measure("parity/check-fused-vs-per-step", lambda: {"stats": compare_folders(
                images("fp32", fused), images("fp32", {"MARSPEC_HEAD_LOOP": "off"}))})

    def stage_parity_trained(self):
        """fp16 against fp32 on the embedded target, a trained head (its fused head unrolled, as a
        GPU runs it by default): random MAR-B's tokens reach 1.7e5 (its eps does not predict the
        noise), so its images say little about fp16 on a real checkpoint. With the head's
        residual stream fp32 (the default) and fp16 (half_pack.py --head-stream fp16)."""
        def pack(stream):
            return self.half_copy(f"target-fp16-stream-{stream}", os.path.join(ROOT, "models", "target"), stream)

        def images(p, precision):
            return self.generated(f"trained-{os.path.basename(p)}-{precision}",
                                  ["--model", p, "--class", "0,1,2,3,4,5,6,7", "--n", "1", "--batch", "8", "--cfg", "3",
                                   "--seed", "5", "--precision", precision],
                                  {"MARSPEC_HEAD_LOOP": "on", **UNROLLED})  # as a GPU runs it by default; the CPU too here

        for stream in ("fp32", "fp16"):
            def fn(stream=stream):
                self.need_marspec("fp16")
                reference = images(pack("fp32"), "fp32")  # the fp32 graphs are the same in both packs
                return {"stats": compare_folders(reference, images(pack(stream), "fp16"))}
            self.measure(f"parity/trained-fp16-vs-fp32/stream-{stream}", fn)
        if self.args.tiny:  # the packs, the images and the comparison, where fp16 cannot run: fp32 of both packs
            self.measure("parity/check-trained-packs", lambda: {"stats": compare_folders(
                images(pack("fp32"), "fp32"), images(pack("fp16"), "fp32"))})

    def stage_stream(self):
        """What a node costs on the device, in a controlled pair: the replayed head at batch 8 with
        the head's residual stream fp16 (half_pack.py --head-stream fp16: MAR-B's fused head has 61
        nodes per guided step instead of 71: ten Casts fewer, nothing else changed), beside the
        ratio stage's row of the default pack. A random head's tokens outgrow fp16 there (NaN),
        which changes no kernel's work: a timing row only, kept out of the ratios (its key is not
        a marspec row's). On the CPU (fp16 refused) the same row at fp32 checks the pack and the
        plumbing."""
        a = self.args
        precision = self.fast()
        self.marspec_row(precision, "graph", a.batches[1], pack=lambda: self.half_copy("pack-head-stream-fp16", a.pack, "fp16", a.steps),
                         key=f"timing/{precision}/graph-head-stream-fp16/b{a.batches[1]}")

    def stage_pick(self):
        """What handing back only the predicted rows of each transformer pass saves
        (mar.RowPicker): the replayed head at batch 64, where a guided pass's whole z is 100 MB,
        with MARSPEC_PICK_ROWS=off beside the ratio stage's row (picking on). A timing row, kept
        out of the ratios. Skipped when the preflight already turned picking off."""
        a = self.args
        precision, b = self.fast(), a.batches[2]
        key = f"timing/{precision}/graph-pick-off/b{b}"
        if os.environ.get("MARSPEC_PICK_ROWS") == "off":
            self.keep(key, {"skipped": "picking is off for the whole run (the preflight turned it off)"})
            return
        self.marspec_row(precision, "graph", b, key=key, env={"MARSPEC_PICK_ROWS": "off"})

    def stage_cache(self):
        """The replayed head with the cache at batch 8 and 64, its K/V kept where the cached
        graph runs (MARSPEC_CACHE_ON_DEVICE=on: the GPU's default, forced on the CPU so that the
        tiny form runs the device's code). Untried on a GPU: if a row fails with an error naming
        MARSPEC_CACHE_ON_DEVICE, that row and the next run with the K/V in host memory (=off), as
        the run of 2026-11-27 had them, recorded and named in the report."""
        env = {"MARSPEC_CACHE_ON_DEVICE": "on"}
        for b in self.args.batches[1:]:
            rec = self.marspec_row(self.fast(), "graph+cache", b, env=env)
            if env["MARSPEC_CACHE_ON_DEVICE"] == "on" and rec and "MARSPEC_CACHE_ON_DEVICE" in rec.get("error", ""):
                self.keep("cache/kv-in-host-memory", {"error": rec["error"], "note": "the cache on the device failed: "
                                                      "MARSPEC_CACHE_ON_DEVICE=off for the cache rows from here on"})
                env = {"MARSPEC_CACHE_ON_DEVICE": "off"}
                self.marspec_row(self.fast(), "graph+cache", b, env=env)

    def stage_cache_kv(self):
        """What keeping the cache's K/V on the device saves: the replayed head with the cache at
        batch 8 with MARSPEC_CACHE_ON_DEVICE=off (every lazy call copies every block's K/V of
        every image half across PCIe) beside the cache stage's row (on the device). A timing row,
        kept out of the ratios. Skipped when the cache stage already fell back to =off."""
        precision, b = self.fast(), self.args.batches[1]
        key = f"timing/{precision}/graph+cache-kv-host/b{b}"
        if "cache/kv-in-host-memory" in self.results:
            self.keep(key, {"skipped": "the cache rows already ran with their K/V in host memory (the cache stage fell back)"})
            return
        self.marspec_row(precision, "graph+cache", b, key=key, env={"MARSPEC_CACHE_ON_DEVICE": "off"})

    def stage_kernels(self):
        a = self.args
        precision = self.fast()  # every session opened writes its weights again: the fastest rows' graphs only

        def fn():
            self.need_marspec(precision)
            folder = os.path.join(self.work, f"optimized-{precision}")
            self.generated(f"kernels-{precision}", ["--model", a.pack, "--class", "0", "--n", "1", "--num-iter", "2",
                                                    "--steps", str(a.steps), "--cfg", str(a.cfg), "--precision", precision],
                           {**UNROLLED, "MARSPEC_HEAD_LOOP": "on", "MARSPEC_ORT_OPTIMIZED_DIR": folder})
            return {"stats": count_kernels(folder, a.steps)}
        self.measure(f"kernels/{precision}", fn)

    def stage_energy(self):
        a = self.args

        def fn():
            if a.tiny:
                raise Skip("the tiny form does not train (its own CPU check: docs/models.md, gpu_energy_head.sh's header)")
            data = os.environ.get("MARSPEC_FMNIST", "/usr/share/datasets/fashion-mnist")
            if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
                raise Skip(f"no Fashion-MNIST in {data}: carry a copy and set MARSPEC_FMNIST (docs/gpu.md)")
            # a minute kept for its start (torch, the data, held-out contexts) and its last save
            minutes = (self.left() - 60) / 60
            if minutes < 1:
                raise Skip(f"{self.left():.0f} s left, under the 120 s it needs")
            out = os.path.join(a.out, "energy-head")
            log = self.command(["bash", os.path.join(HERE, "gpu_energy_head.sh"), out, f"{minutes:.1f}", a.device])
            return {"stats": {"minutes": round(minutes, 1), "log": log[-1500:]}}
        self.measure("energy-head", fn, need=0)

    def run(self):
        b1, b8, b64 = self.args.batches
        stages = {
            "pack": self.stage_pack,
            "ratio-b8": lambda: self.ratio_rows(b8),
            "ratio-b64": lambda: self.ratio_rows(b64),
            "parity": self.stage_parity,
            "parity-trained": self.stage_parity_trained,
            "kernels": self.stage_kernels,
            "head-kinds": lambda: [self.marspec_row(self.fast(), h, b) for b in (b8, b64) for h in ("fused", "rolled")],
            "cache": self.stage_cache,
            "fp32": lambda: [self.marspec_row("fp32", "graph", b) for b in (b8, b64)],
            "official-fp32": lambda: [self.official_row("fp32", b) for b in (b8, b64)],
            "per-step": lambda: [self.marspec_row(p, "per-step", b) for b in (b8, b64) for p in PRECISIONS],
            "batch-1": lambda: [self.ratio_rows(b1), self.marspec_row("fp32", "graph", b1),
                                *(self.marspec_row(self.fast(), h, b1) for h in ("fused", "per-step")), self.official_row("fp32", b1)],
            "stream": self.stage_stream,
            "pick": self.stage_pick,
            "cache-kv": self.stage_cache_kv,
            "energy-head": self.stage_energy,
        }
        if self.args.device != "cpu":
            self.stage_end = time.time() + 60
            self.preflight()
        for name, budget in STAGES:
            start = time.time()
            self.stage, self.not_started = (name, budget), 0
            self.stage_end = start + budget if budget else self.deadline
            if self.deadline - start < 10:
                self.stage_log[name] = {"budget": budget, "seconds": 0, "status": "not started: the run's deadline was spent"}
                continue
            stages[name]()
            spent = time.time() - start
            status = "done"
            if self.not_started:
                out_of = "the run's deadline" if self.deadline <= self.stage_end else "its budget"
                status = f"{self.not_started} not started: {out_of} was spent"
            self.stage_log[name] = {"budget": budget, "seconds": round(spent, 1), "status": status}
            self.report()
        self.stage_end = self.deadline
        self.report()

    def report(self):
        write_report(self)


class Skip(Exception):
    """A measurement that cannot run here, with the reason the report gives."""


def count_kernels(folder, steps):
    """Nodes of each session ONNX Runtime wrote to folder after optimising it: of each unrolled
    head (inputs x_T and noise, no Loop or If) in all and per diffusion step by op type (the
    once-per-call part counted in, a fraction of a node per step at 100 steps), and of each
    transformer (inputs tokens and mask) per pass."""
    import onnx  # the pack tools need it anyway
    heads, transformers = [], []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".onnx")):
        g = onnx.load(os.path.join(folder, name), load_external_data=False).graph
        inputs = {i.name for i in g.input}
        ops = {}
        for n in g.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        top = sorted(ops.items(), key=lambda kv: -kv[1])
        if {"x_T", "noise"} <= inputs and not any(n.op_type in ("Loop", "If") for n in g.node):
            heads.append({"session": name, "nodes": len(g.node), "per_step": round(len(g.node) / steps, 1),
                          "ops_per_step": {op: round(c / steps, 2) for op, c in top}})
        elif {"tokens", "mask"} <= inputs:  # the decoder reads tokens alone
            transformers.append({"session": name, "nodes": len(g.node), "ops": dict(top)})
    if not heads:
        raise RuntimeError(f"no unrolled head session among the optimised graphs in {folder}: {sorted(os.listdir(folder))}")
    return {"steps": steps, "heads": heads, "transformers": transformers}


def compare_folders(a, b):
    """Per-image pixel differences of two folders of the same PNG names, against PARITY_*."""
    names = sorted(n for n in os.listdir(a) if n.endswith(".png"))
    if not names or names != sorted(n for n in os.listdir(b) if n.endswith(".png")):
        raise RuntimeError(f"image names differ: {names} / {sorted(os.listdir(b))}")
    worst_mean, worst_max, worst_share, within = 0.0, 0, 1.0, 0
    for n in names:
        d = np.abs(read_png(os.path.join(a, n)).astype(np.int16) - read_png(os.path.join(b, n)).astype(np.int16))
        mean, share = float(d.mean()), float((d <= PARITY_PIXEL_LEVELS).mean())
        within += mean <= PARITY_MEAN_LEVELS and share >= PARITY_SHARE
        worst_mean, worst_max, worst_share = max(worst_mean, mean), max(worst_max, int(d.max())), min(worst_share, share)
    return {"images": len(names), "within": within, "worst_mean": worst_mean, "worst_max": worst_max, "worst_share": worst_share}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="toy sizes on the CPU: the check make test runs")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "marspec"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default=None, help="results folder (default out/gpu-bench, or out/gpu-bench-tiny)")
    ap.add_argument("--packs", default=os.path.join(ROOT, "out", "packs"))
    ap.add_argument("--official", default=None, help="folder of the official MAR code (default out/official-mar where it is)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads of CPU runs (0 = the runtime's default)")
    ap.add_argument("--deadline", type=float, default=0, help="Unix time after which nothing starts (default: 8 minutes from now)")
    args = ap.parse_args()
    args.passed = [x for i, x in enumerate(sys.argv[1:]) if x != "--python" and (i == 0 or sys.argv[i] != "--python")]
    args.deadline = args.deadline or time.time() + 480
    t = args.tiny
    args.out = args.out or os.path.join(ROOT, "out", "gpu-bench-tiny" if t else "gpu-bench")
    args.model, args.vae = ("test_small", "test_tiny") if t else ("mar_base", "kl16")
    args.packs = os.path.abspath(args.packs)
    args.pack = os.path.join(args.packs, args.model.replace("_", "-"))
    args.batches = [1, 2, 4] if t else [1, 8, 64]
    args.num_iter, args.steps, args.cfg = (8, 5, 2.9) if t else (64, 100, 2.9)
    if args.official is None:
        default = os.path.join(ROOT, "out", "official-mar")
        args.official = default if os.path.isfile(os.path.join(default, "models", "mar.py")) else ""
    args.official = os.path.abspath(args.official) if args.official else ""
    if not os.path.exists(args.bin):
        sys.exit(f"gpu_mar: {args.bin} not found: build it with `go build -o bin/marspec ./cmd/marspec` (scripts/gpu/gpu_bench.sh does)")
    run = Run(args)
    run.run()
    print(f"gpu_mar: {len(run.results)} results in {run.results_path}; report {os.path.join(args.out, 'gpu-mar.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
