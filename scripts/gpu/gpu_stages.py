"""The staged GPU run, in priority order, each result written as soon as it is measured (a
run cut off still brings back what finished):

  1. parity    CUDA against the CPU on the embedded pair: the same seed's images (the default
               preset, the target at one token per step, spec prefix exact), pixel differences
               against a tolerance stated before any GPU ran; then one `serve` POST on the GPU,
               whose image must equal a local GPU generate of the same request.
  2. embedded  the embedded pair at batch 1 and 32: the target at one token per step, `fast`,
               `balanced`, spec prefix and group (exact acceptance) with the pack draft and the
               self-draft at gamma 4 and 8: images/s, the measured speedups and, beside them,
               the sampler's own prediction (arsampler.PredictedGPUSpeedup, c from the same run).
  3. fullsize  a random-weight MAR-B pack: ms per transformer pass at gamma+1 rows against one
               row (the ratio that decides lossless speedup), head step, decoder, then marspec
               and the official PyTorch code at the same settings (num_iter 64, 100 steps).

Run by scripts/gpu/gpu_bench.sh (`bash scripts/gpu/gpu_bench.sh stages ...`), which sets up the CUDA
runtime and the binary first; `--tiny` runs the same on the CPU at tiny sizes (a check that it
runs, not a GPU number). Every measurement is one line of OUT/results.jsonl keyed by what it
measured; a rerun skips those, so a cut run goes on where it stopped. OUT/gpu-stages.md is
rewritten after each one.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)  # scripts/: imports name their folder (scripts/README.md)
from gpu.gpu_bench import device_name, load_results, official_command  # noqa: E402
from lib.pngfile import read_png  # noqa: E402

# Stated before any GPU ran: the same seed on CUDA and on the CPU must give, per image, a mean
# |difference| of at most 1 grey level (of 255) and 99.9% of pixels within 4 levels. The draws
# are the same (the noise is drawn in Go, not on the device), so only float rounding in the
# networks differs; a spec run may flip an acceptance decision on a near-tie, after which that
# image follows another, equally lawful path: those are counted, not hidden.
MEAN_LEVELS, PIXEL_LEVELS, PIXEL_SHARE = 1.0, 4, 0.999

SPEC_CONFIGS = [(draft, gamma, verify) for draft in ("pack", "self") for gamma in (4, 8) for verify in ("prefix", "group")]


class Run:
    def __init__(self, args):
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.results_path = os.path.join(args.out, "results.jsonl")
        self.results = load_results(self.results_path)
        self.deadline = time.time() + args.time_budget if args.time_budget > 0 else float("inf")
        self.stopped = False
        self.work = tempfile.mkdtemp(prefix="gpu-stages-")

    # ---- bookkeeping ----

    def left(self):
        return self.deadline - time.time()

    def keep(self, key, rec):
        rec = {"key": key, **rec}
        self.results[key] = rec
        with open(self.results_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.report()
        return rec

    def due(self, key, need=20):
        """Whether key still has to be measured and there is time to start it."""
        if key in self.results:
            return False
        if self.left() < need:
            self.stopped = True
            return False
        return True

    def marspec(self, argv, device=None, timeout=None):
        cmd = [self.args.bin, *argv]
        if device:
            cmd += ["--device", device]
        if self.args.threads and device == "cpu":
            cmd += ["--threads", str(self.args.threads)]
        print("gpu_stages: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or max(self.left(), 1))
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {clip(p.stderr)}")
        return p.stdout

    def generate(self, argv, device, out):
        stdout = self.marspec(["generate", *argv, "--json", "--quiet", "--grid", "none", "--out", out], device)
        return json.loads(stdout.strip().splitlines()[-1])

    def guarded(self, key, fn, need=20):
        """Runs fn for key when due; a failure is recorded (and shown) instead of ending the run."""
        if not self.due(key, need):
            return self.results.get(key)
        try:
            return self.keep(key, fn())
        except subprocess.TimeoutExpired:
            self.stopped = True
        except Exception as e:  # noqa: BLE001: one failed measurement must not lose the others
            traceback.print_exc()
            print(f"gpu_stages: {key}: {e}", file=sys.stderr, flush=True)
            self.results[key] = {"key": key, "error": str(e)[-600:]}
            self.report()
        return None

    # ---- 1. parity ----

    def parity(self):
        a = self.args
        classes = "0,1,2,3" if a.tiny else "0,1,2,3,4,5,6,7,8,9"
        small = ["--num-iter", "4", "--steps", "5"] if a.tiny else []
        runs = {
            "default": ["--class", classes, "--n", "1", "--seed", "7"],
            "target": ["--model", "target", "--class", classes, "--n", "1", "--seed", "7", *small],
            "spec-prefix-exact": ["--mode", "spec", "--draft", "draft", "--verify", "prefix", "--acceptance", "exact",
                                  "--gamma", "4", "--class", classes, "--n", "1", "--seed", "7", *(["--steps", "5"] if a.tiny else [])],
        }
        for name, argv in runs.items():
            def one(argv=argv, name=name):
                dirs = []
                for side, dev in (("cpu", "cpu"), ("device", a.device)):
                    dirs.append(os.path.join(self.work, f"parity-{name}-{side}"))
                    self.generate(argv, dev, dirs[-1])
                return {"argv": argv, **compare_folders(*dirs)}
            self.guarded(f"parity/{name}", one, need=60)
        self.guarded("parity/serve", self.serve_post, need=60)

    def serve_post(self):
        """One POST to `serve` on the device; its image must equal a local generate of the same
        request on the same device (both the default preset, class 1, seed 7)."""
        a = self.args
        port = 18000 + os.getpid() % 1000
        data = os.path.join(self.work, "serve-data")
        log = open(os.path.join(self.work, "serve.log"), "w")
        srv = subprocess.Popen([a.bin, "serve", "--device", a.device, "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                               stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            start = time.time()
            while True:
                try:
                    with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if srv.poll() is not None or time.time() - start > 120:
                    log.flush()
                    raise RuntimeError(f"serve did not become ready: {open(log.name).read()[-1500:]}")
                time.sleep(0.5)
            ready = time.time() - start
            argv = ["--class", "1", "--n", "1", "--seed", "7"]
            served = os.path.join(self.work, "serve-images")
            t0 = time.time()
            self.marspec(["generate", "--server", url, *argv, "--json", "--quiet", "--grid", "none", "--out", served])
            post = time.time() - t0
        finally:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(30)
            except subprocess.TimeoutExpired:
                srv.kill()
        local = os.path.join(self.work, "serve-local")
        self.generate(argv, a.device, local)
        same = compare_folders(local, served)
        return {"argv": argv, "ready_seconds": round(ready, 1), "post_seconds": round(post, 2), **same}

    # ---- 2. the embedded pair ----

    def embedded_configs(self):
        steps = ["--steps", "5"] if self.args.tiny else []
        out = [("target-k0", ["--model", "target", "--num-iter", "0", *steps]),
               ("fast", ["--preset", "fast"]),
               ("balanced", ["--preset", "balanced"])]
        for draft, gamma, verify in SPEC_CONFIGS:
            out.append((f"spec-{draft}-g{gamma}-{verify}",
                        ["--mode", "spec", "--target", "target", "--draft", "draft" if draft == "pack" else "self",
                         "--gamma", str(gamma), "--verify", verify, "--acceptance", "exact", "--prefill", "0.05", *steps]))
        return out

    def embedded(self):
        for batch in self.args.embedded_batches:
            if batch == 1:
                classes, n = ",".join(str(c) for c in range(self.args.batch1_images)), 1
            else:
                classes, n = ",".join(str(c) for c in range(min(batch, 8))), max(1, 2 * batch // min(batch, 8))
            for name, argv in self.embedded_configs():
                full = [*argv, "--class", classes, "--n", str(n), "--batch", str(batch), "--seed", "11"]
                self.guarded(f"embedded/b{batch}/{name}",
                             lambda full=full, name=name, batch=batch: {"argv": full, "stats": self.generate(
                                 full, self.args.device, os.path.join(self.work, f"emb-{batch}-{name}"))})

    # ---- 3. full size ----

    def fullsize(self):
        a = self.args
        pack = self.random_pack()
        if pack is None:
            return
        rows = [1, 5, 9, 17, 33]
        self.guarded("fullsize/passes", lambda: {"ms": parse_precision_table(self.marspec(
            ["bench", "--precisions", "fp32", "--target", pack, "--forward-batches", ",".join(map(str, rows)),
             "--head-rows", "1,5,9,33,256" if not a.tiny else "1,5,9", "--gen-batches", "", "--rounds", "3",
             "--reps", "3" if a.tiny else "10"], a.device))}, need=60)
        steps, k, batch = ("5", "4", "2") if a.tiny else ("100", "64", "8")
        self.guarded("fullsize/parts", lambda: {"parts": json.loads(self.marspec(
            ["bench", "--parts", "--target", pack, "--json", "--images", batch, "--batch", batch, "--num-iter", k,
             "--steps", steps, "--rounds", "1"], a.device).strip().splitlines()[-1])}, need=60)
        classes = ",".join(str(c) for c in range(int(batch)))
        # cfg 1 pinned: a MAR pack's default is its published guidance; the official run is unguided
        argv = ["--model", pack, "--cfg", "1", "--class", classes, "--n", "1", "--batch", batch, "--num-iter", k,
                "--steps", steps, "--seed", "3"]
        self.guarded(f"fullsize/marspec/b{batch}/k{k}", lambda: {"argv": argv, "stats": self.generate(
            argv, a.device, os.path.join(self.work, "fullsize-marspec"))}, need=60)
        if a.official:
            self.guarded(f"fullsize/official/b{batch}/k{k}", lambda: self.official(pack, batch, k, steps), need=90)

    def official(self, pack, batch, k, steps):
        a = self.args
        cmd = official_command(a.python, a.official, a.random_model, "test_tiny" if a.tiny else "kl16", pack, batch, batch, k,
                               steps, a.device)
        print("gpu_stages: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=max(self.left(), 1))
        line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        if p.returncode != 0 or not line.startswith("{"):
            raise RuntimeError(f"official_mar_bench.py failed ({p.returncode}): {p.stderr.strip()[-1500:]}")
        stats = json.loads(line)
        if "skipped" in stats:
            raise RuntimeError(f"official_mar_bench.py: {stats['skipped']}")
        return {"argv": cmd[2:], "stats": stats}

    def random_pack(self):
        """The random-weight pack, made here unless another process is making it (a file
        NAME.making beside it, as the GPU call that starts it early leaves): then waited for."""
        a = self.args
        pack = os.path.join(a.packs, a.random_model.replace("_", "-"))
        making = pack + ".making"
        while os.path.exists(making) and not os.path.exists(pack + ".done"):
            if self.left() < 60:
                self.stopped = True
                return None
            time.sleep(2)
        if os.path.exists(os.path.join(pack, "manifest.json")) and (os.path.exists(pack + ".done") or a.tiny):
            return pack
        cmd = [a.python, os.path.join(SCRIPTS, "packs", "make_random_packs.py"), "--models", a.random_model,
               "--vae", "test_tiny" if a.tiny else "kl16", "--out", a.packs, "--checkpoint"]
        print("gpu_stages: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
        if subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore")).returncode != 0:
            self.results["fullsize/pack"] = {"key": "fullsize/pack", "error": "make_random_packs.py failed (its message is in the log)"}
            return None
        open(pack + ".done", "w").close()
        return pack

    # ---- report ----

    def report(self):
        a = self.args
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        L = [f"### GPU stages: {device_name(self.args.device)}", "",
             f"`bash scripts/gpu/gpu_bench.sh stages {' '.join(a.passed)}` at commit {commit or '?'}, device `{a.device}`, "
             f"{datetime.date.today().isoformat()}.", ""]
        if a.tiny:
            L += ["**Tiny sizes on the CPU** (`--tiny`): checks that the script runs end to end; not a GPU number.", ""]
        L += self.report_parity() + self.report_embedded() + self.report_fullsize()
        if self.stopped:
            L += ["*Incomplete: the time budget ran out; the same command measures the rest.*", ""]
        with open(os.path.join(a.out, "gpu-stages.md"), "w") as f:
            f.write("\n".join(L))

    def report_parity(self):
        L = ["#### 1. CUDA against the CPU (embedded pair, seed 7)", "",
             f"Tolerance, per image: mean |difference| at most {MEAN_LEVELS:g} grey level of 255, and "
             f"{PIXEL_SHARE:.1%} of pixels within {PIXEL_LEVELS} levels.", "",
             "| run | images | within tolerance | identical bytes | worst mean abs (levels) | worst max abs | worst share within |",
             "|---|---|---|---|---|---|---|"]
        for name in ("default", "target", "spec-prefix-exact", "serve"):
            r = self.results.get(f"parity/{name}")
            label = "serve POST vs local generate (same device)" if name == "serve" else name
            if not r:
                L.append(f"| {label} | not measured | | | | | |")
            elif "error" in r:
                L.append(f"| {label} | failed: {short(r['error'])} | | | | | |")
            else:
                L.append(f"| {label} | {r['images']} | {r['within']} | {r['identical']} | {r['worst_mean']:.3f} | "
                         f"{r['worst_max']} | {r['worst_share']:.4f} |")
        s = self.results.get("parity/serve")
        if s and "ready_seconds" in s:
            L += ["", f"`serve --device {self.args.device}` was ready {s['ready_seconds']} s after start; the POST "
                  f"(class 1, seed 7, default preset) took {s['post_seconds']} s end to end."]
        return L + [""]

    def ips(self, key):
        r = self.results.get(key)
        return r["stats"].get("images_per_second") if r and "stats" in r else None

    def report_embedded(self):
        L = ["#### 2. Embedded pair: images/s", ""]
        for batch in self.args.embedded_batches:
            base, fast = self.ips(f"embedded/b{batch}/target-k0"), self.ips(f"embedded/b{batch}/fast")
            L += [f"Batch {batch} (speedups over the target at one token per step, and over `fast`, in the same run):", "",
                  "| configuration | images/s | vs target 1 token/step | vs fast | alpha | c | predicted GPU speedup |",
                  "|---|---|---|---|---|---|---|"]
            for name, _ in self.embedded_configs():
                r = self.results.get(f"embedded/b{batch}/{name}")
                if not r:
                    L.append(f"| {name} | not measured | | | | | |")
                    continue
                if "error" in r:
                    L.append(f"| {name} | failed: {short(r['error'])} | | | | | |")
                    continue
                st = r["stats"]
                v = st["images_per_second"]
                alpha = st.get("alpha")
                c = st.get("cost_ratio_c")
                pred = st.get("gpu_speedup_predicted")
                L.append(f"| {name} | {v:.3g} | {ratio(v, base)} | {ratio(v, fast)} | "
                         f"{'' if alpha is None else f'{alpha:.3f}'} | {'' if c is None else f'{c:.3f}'} | "
                         f"{'' if not pred else f'{pred:.2f}x'} |")
            L.append("")
        return L

    def report_fullsize(self):
        a = self.args
        L = [f"#### 3. Random-weight {a.random_model} (compute per pass is the model's; images are not)", ""]
        r = self.results.get("fullsize/passes")
        if r and "ms" in r:
            ms = r["ms"]
            one = ms.get("transformer pass (ms)", {}).get(1)
            L += ["| part | rows | ms | / one row |", "|---|---|---|---|"]
            for part, by in ms.items():
                for rows, v in sorted(by.items()):
                    rel = f"{v / one:.2f}" if part.startswith("transformer") and one else ""
                    L.append(f"| {part} | {rows} | {v:.3f} | {rel} |")
            L.append("")
        elif r:
            L += [f"Passes: failed: {short(r.get('error', ''))}", ""]
        p = self.results.get("fullsize/parts")
        if p and "parts" in p:
            L += ["`bench --parts` (one generation): " + json.dumps(p["parts"]), ""]
        for key, label in ((k, k.split("/")[1]) for k in sorted(self.results) if k.startswith("fullsize/marspec") or k.startswith("fullsize/official")):
            r = self.results[key]
            if "error" in r:
                L.append(f"- {label}: failed: {short(r['error'])}")
            else:
                st = r["stats"]
                L.append(f"- {label} ({key.split('/', 2)[2]}): {st['images_per_second']:.3g} images/s")
        return L + [""]


def clip(text, keep=1200):
    """A failed command's stderr for the record: its start (a crash's signal and the Go call that
    was in C) and its end (the last words), not the thousands of goroutine lines between."""
    text = text.strip()
    return text if len(text) <= 2 * keep else text[:keep] + "\n[...]\n" + text[-keep:]


def short(error):
    """The reason of a recorded failure, without the command line before it, on one table line."""
    reason = error.split("): ", 1)[-1] if ") failed (" in error or error.startswith("/") else error
    return " ".join(reason.split())[:240].replace("|", "/")


def ratio(v, base):
    return f"{v / base:.2f}x" if base else "-"


def parse_precision_table(text):
    """{part: {rows: ms}} from `bench --precisions fp32` with one precision."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(transformer pass \(ms\)|head step \(ms\))\s+(\d+)\s+([\d.]+)", line)
        if m:
            out.setdefault(m.group(1), {})[int(m.group(2))] = float(m.group(3))
    if not out:
        raise RuntimeError(f"no timings in bench --precisions output:\n{text[-800:]}")
    return out


def compare_folders(a, b):
    """Per-image pixel differences between two folders of the same file names."""
    names = sorted(n for n in os.listdir(a) if n.endswith(".png"))
    if not names or names != sorted(n for n in os.listdir(b) if n.endswith(".png")):
        raise RuntimeError(f"image names differ: {names} / {sorted(os.listdir(b))}")
    worst_mean = worst_max = 0
    worst_share, within, identical = 1.0, 0, 0
    for n in names:
        with open(os.path.join(a, n), "rb") as fa, open(os.path.join(b, n), "rb") as fb:
            ba, bb = fa.read(), fb.read()
        identical += ba == bb
        x, y = read_png(os.path.join(a, n)).astype(np.int16), read_png(os.path.join(b, n)).astype(np.int16)
        d = np.abs(x - y)
        mean, mx, share = float(d.mean()), int(d.max()), float((d <= PIXEL_LEVELS).mean())
        within += mean <= MEAN_LEVELS and share >= PIXEL_SHARE
        worst_mean, worst_max, worst_share = max(worst_mean, mean), max(worst_max, mx), min(worst_share, share)
    return {"images": len(names), "within": within, "identical": identical, "worst_mean": worst_mean,
            "worst_max": worst_max, "worst_share": worst_share}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="tiny sizes on the CPU: a check that it runs")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "marspec"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default=None, help="results folder (default out/gpu-stages, or out/gpu-stages-tiny)")
    ap.add_argument("--packs", default=os.path.join(ROOT, "out", "packs"))
    ap.add_argument("--stages", default="parity,embedded,fullsize")
    ap.add_argument("--official", default="", help="folder of the official MAR code (models/ and diffusion/, fetched by hand)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads of CPU runs (0 = ONNX Runtime's default)")
    ap.add_argument("--time-budget", type=float, default=480, help="seconds; no new measurement starts after (0 = none)")
    args = ap.parse_args()
    args.passed = [x for i, x in enumerate(sys.argv[1:]) if x != "--python" and (i == 0 or sys.argv[i] != "--python")]
    args.official = os.path.abspath(args.official) if args.official else ""
    args.out = args.out or os.path.join(ROOT, "out", "gpu-stages-tiny" if args.tiny else "gpu-stages")
    args.embedded_batches = [1, 4] if args.tiny else [1, 32]
    args.batch1_images = 2 if args.tiny else 4
    args.random_model = "test_small" if args.tiny else "mar_base"
    if not os.path.exists(args.bin):
        sys.exit(f"gpu_stages: {args.bin} not found: build it with `go build -o bin/marspec ./cmd/marspec` (scripts/gpu/gpu_bench.sh does)")
    run = Run(args)
    if args.device != "cpu":
        # one small image first: a runtime that cannot start on the device (a missing library,
        # a crash in the provider) ends the run in seconds with its own words, not after minutes
        try:
            run.generate(["--model", "target", "--class", "0", "--n", "1", "--num-iter", "4", "--steps", "5"], args.device,
                         os.path.join(run.work, "preflight"))
        except Exception as e:  # noqa: BLE001
            run.results["preflight"] = {"key": "preflight", "error": str(e)}
            with open(os.path.join(args.out, "preflight-failed.txt"), "w") as f:
                f.write(str(e) + "\n")
            sys.exit(f"gpu_stages: {args.device} cannot run the embedded target:\n{e}")
    stages = {"parity": run.parity, "embedded": run.embedded, "fullsize": run.fullsize}
    for name in args.stages.split(","):
        if name not in stages:
            sys.exit(f"gpu_stages: unknown stage {name!r} (allowed: {', '.join(stages)})")
        if not run.stopped:
            stages[name]()
    run.report()
    shutil.rmtree(run.work, ignore_errors=True)
    print(f"gpu_stages: {len(run.results)} results in {run.results_path}; report {os.path.join(args.out, 'gpu-stages.md')}"
          + (" (incomplete: run again)" if run.stopped else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
