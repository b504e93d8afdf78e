"""The measurements of scripts/gpu/gpu_bench.sh: run by that script, which sets up the
runtime and the binary first. See docs/gpu.md for the whole procedure.

For each pair (the embedded Fashion-MNIST pair; random-weight MAR-B draft / MAR-H target):
  - target-only images/s at each --batches size, one token per step (num_iter = L) and MAR's
    64-step schedule (num_iter 64; skipped where L <= 64, as for the embedded pair's 49 tokens);
  - the paper's Table 1 setting: speculative decoding at --spec-batch with gamma in --gammas,
    prefill 5%, prefix and group verification, the draft/target cost ratio c measured;
  - the self-draft (--draft self) at the same settings, and the early exit (--draft exit, prefix,
    without and with --exit-max-error 0.2) where the target pack has one;
  - each against target-only at the same batch, at one token per step and at 64 steps;
  - with --official DIR (random pair): the official PyTorch MAR code's images/s on the same
    weights (scripts/bench/official_mar_bench.py), at 64 steps and at one token per step.

Every measurement is one `marspec generate --json` and one line of OUT/results.jsonl keyed by its
settings; a rerun skips what is there, so a run cut off (the GPU machine stops a command after
10 minutes; --time-budget stops starting new ones before that) goes on where it stopped.
OUT/gpu-bench.md is rewritten after each measurement: the section for docs/BENCHMARKS.md.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
ROOT = os.path.dirname(SCRIPTS)


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def load_results(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    out[r["key"]] = r
    return out


def device_name(device):
    """The GPU's name and driver for a cuda device (nvidia-smi), else the CPU's model and cores."""
    if device.startswith("cuda") and shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip():
            return "GPU " + p.stdout.strip().splitlines()[0] + f", {os.cpu_count()} CPU cores"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"CPU {cpu}, {os.cpu_count()} cores"


def official_command(python, code, model, vae_config, pack, batch, images, num_iter, steps, device):
    """scripts/bench/official_mar_bench.py's command line: the official code on a pack's weights."""
    cmd = [python, os.path.join(SCRIPTS, "bench", "official_mar_bench.py"), "--code", code, "--model", model, "--vae-config", vae_config,
           "--pack", pack, "--batch", str(batch), "--images", str(images), "--num-iter", str(num_iter), "--steps", str(steps)]
    return cmd if device.startswith("cuda") else cmd + ["--cpu"]


def manifest(pack):
    """A pack's manifest: a folder's own, or for an embedded pack's name the committed copy."""
    path = os.path.join(pack, "manifest.json")
    if not os.path.exists(path):
        path = os.path.join(ROOT, "models", pack, "manifest.json")
    with open(path) as f:
        return json.load(f)


def seq_len(pack):
    """L of a pack, from its manifest."""
    g = manifest(pack)["grid"]
    return g["height"] * g["width"]


class Bench:
    def __init__(self, args):
        self.args = args
        os.makedirs(args.out, exist_ok=True)
        self.results_path = os.path.join(args.out, "results.jsonl")
        self.results = load_results(self.results_path)
        self.deadline = time.time() + args.time_budget if args.time_budget > 0 else float("inf")
        self.stopped = False

    def images_for(self, batch):
        """At least --images, in whole batches, and two batches where that is cheap (so the
        first batch's one-off costs weigh less)."""
        n = max(self.args.images, 2 * batch if batch <= 32 else batch)
        return -(-n // batch) * batch

    def run(self, key, argv, timeout_note=""):
        """One measurement: marspec generate ARGV --json, unless its key is done already."""
        if key in self.results:
            return self.results[key]
        left = self.deadline - time.time()
        if left < 20:
            self.stopped = True
            return None
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [self.args.bin, "generate", *argv, "--device", self.args.device, "--json", "--grid", "none",
                   "--out", os.path.join(tmp, "images")]
            if self.args.threads:
                cmd += ["--threads", str(self.args.threads)]
            print(f"gpu_bench: {key}", file=sys.stderr, flush=True)
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
            except subprocess.TimeoutExpired:
                self.stopped = True
                return None
        if p.returncode != 0:
            sys.exit(f"gpu_bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.strip()}")
        stats = json.loads(p.stdout.strip().splitlines()[-1])
        rec = {"key": key, "argv": argv, "stats": stats}
        self.results[key] = rec
        with open(self.results_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.write_markdown()
        return rec

    def official(self, key, pack, model, vae_config, batch, num_iter):
        if key in self.results or not self.args.official:
            return self.results.get(key)
        if self.deadline - time.time() < 60:
            self.stopped = True
            return None
        cmd = official_command(self.args.python, self.args.official, model, vae_config, pack, batch, self.images_for(batch),
                               num_iter, self.args.steps or 100, self.args.device)
        print(f"gpu_bench: {key}", file=sys.stderr, flush=True)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=self.deadline - time.time())
        except subprocess.TimeoutExpired:
            self.stopped = True
            return None
        line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        if p.returncode != 0 or not line.startswith("{"):
            # not kept in results.jsonl, so the next run tries again; shown in this run's report
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"gpu_bench: official_mar_bench.py failed ({p.returncode}):\n{p.stderr.strip()[-2000:]}", file=sys.stderr)
            self.results[key] = {"key": key, "stats": {"skipped": f"failed this run: {last}"}}
            self.write_markdown()
            return None
        rec = {"key": key, "argv": cmd[2:], "stats": json.loads(line)}
        self.results[key] = rec
        with open(self.results_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.write_markdown()
        return rec

    def pairs(self):
        a = self.args
        out = []
        if "embedded" in a.pairs:
            out.append(("embedded", "target", "draft", None))
        if "random" in a.pairs:
            t, d = (os.path.join(a.packs, m.replace("_", "-")) for m in (a.random_target, a.random_draft))
            out.append(("random", t, d, (a.random_target, "test_tiny" if a.tiny else "kl16")))
        return out

    def measure(self):
        a = self.args
        steps = ["--steps", str(a.steps)] if a.steps else []
        for name, target, draft, official in self.pairs():
            L = seq_len(target)
            for batch in self.target_batches():
                for k in a.num_iters:
                    if k and k >= L:
                        continue
                    n = self.images_for(batch)
                    # cfg 1 pinned: a MAR pack's own default is its published guidance, the
                    # official code's reference runs unguided
                    self.run(f"{name}/target/b{batch}/k{k}", ["--model", target, "--cfg", "1", "--class", "0", "--n", str(n),
                                                             "--batch", str(batch), "--num-iter", str(k), *steps])
            sb = a.spec_batch
            n = self.images_for(sb)
            for drafter, draft_arg, extra, verifies in self.drafters(target, draft):
                for gamma in a.gammas:
                    for verify in verifies:
                        argv = ["--mode", "spec", "--target", target, "--draft", draft_arg, "--cfg", "1", *extra,
                                "--class", "0", "--n", str(n), "--batch", str(sb), "--gamma", str(gamma),
                                "--prefill", "0.05", "--verify", verify, *steps]
                        self.run(f"{name}/spec-{drafter}/b{sb}/g{gamma}/{verify}", argv)
            if official:
                for k in a.num_iters:
                    if k and k >= L:
                        continue
                    self.official(f"{name}/official/b{sb}/k{k}", target, official[0], official[1], sb, k or L)
            if self.stopped:
                break
        self.write_markdown()

    @staticmethod
    def drafters(target, draft):
        """The draft sources of a pair: (label, --draft value, extra flags, verifications). The
        early exit (prefix only; without and with its confidence bound) when the target pack has
        the early_exit graphs."""
        out = [("pack", draft, [], ("prefix", "group")), ("self", "self", [], ("prefix", "group"))]
        if "early_exit" in manifest(target):
            out += [("exit", "exit", [], ("prefix",)),
                    ("exit-bound0.2", "exit", ["--exit-max-error", "0.2"], ("prefix",))]
        return out

    def target_batches(self):
        """--batches, and the speculative rows' batch, which their speedups are taken at."""
        return sorted(set(self.args.batches) | {self.args.spec_batch})

    # ---- report ----

    def device_name(self):
        return device_name(self.args.device)

    def ips(self, key):
        r = self.results.get(key)
        if not r or "images_per_second" not in r["stats"]:
            return None
        return r["stats"]["images_per_second"]

    def write_markdown(self):
        a = self.args
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        lines = [f"### GPU benchmark: {self.device_name()}", "",
                 f"`bash scripts/gpu/gpu_bench.sh {' '.join(a.passed)}` at commit {commit or '?'}, device `{a.device}`, "
                 f"{datetime.date.today().isoformat()}. Images/s of `marspec generate` (generation and decoding; models "
                 "opened before timing); each row one process. Random-weight packs: the compute per pass is MAR's, the "
                 "images and the draft's acceptance are not, so alpha and the speculative speedups of that pair say "
                 "nothing about trained models; c and target-only throughput do.", ""]
        if a.tiny:
            lines += ["**Tiny sizes on the CPU** (`--tiny`): checks that the script runs end to end; not a GPU number.", ""]
        for name, target, draft, official in self.pairs():
            L = seq_len(target)
            lines += [f"#### Pair `{name}`: target `{target}`, draft `{draft}` (L = {L} tokens)", "",
                      "Target-only, images/s:", "",
                      "| batch | " + " | ".join("one token per step" if k == 0 else f"{k} steps" for k in a.num_iters if not (k and k >= L)) + " |",
                      "|---|" + "---|" * len([k for k in a.num_iters if not (k and k >= L)])]
            for batch in self.target_batches():
                cells = []
                for k in a.num_iters:
                    if k and k >= L:
                        continue
                    v = self.ips(f"{name}/target/b{batch}/k{k}")
                    cells.append(f"{v:.3g}" if v is not None else "not measured")
                lines.append(f"| {batch} | " + " | ".join(cells) + " |")
            sb = a.spec_batch
            base1 = self.ips(f"{name}/target/b{sb}/k0")
            kmax = max([k for k in a.num_iters if 0 < k < L], default=0)  # MAR's schedule: 64 steps
            basek = self.ips(f"{name}/target/b{sb}/k{kmax}") if kmax else None
            lines += ["", f"Speculative decoding at batch {sb}, prefill 5% (the paper's Table 1 setting); speedup = images/s "
                      "over target-only at the same batch" + (f" at one token per step / at {kmax} steps:" if kmax else
                                                              f" at one token per step (L = {L}: no fewer-step schedule asked for):"), "",
                      f"| draft | gamma | verify | images/s | alpha | c | speedup vs 1 token/step | speedup vs {kmax or '-'} steps |",
                      "|---|---|---|---|---|---|---|---|"]
            for drafter, _, _, verifies in self.drafters(target, draft):
                for gamma in a.gammas:
                    for verify in verifies:
                        r = self.results.get(f"{name}/spec-{drafter}/b{sb}/g{gamma}/{verify}")
                        if not r:
                            lines.append(f"| {drafter} | {gamma} | {verify} | not measured | | | | |")
                            continue
                        st = r["stats"]
                        v = st["images_per_second"]
                        c = st.get("cost_ratio_c")
                        s1 = f"{v / base1:.2f}x" if base1 else "-"
                        s64 = f"{v / basek:.2f}x" if basek else "-"
                        lines.append(f"| {drafter} | {gamma} | {verify} | {v:.3g} | {st.get('alpha', float('nan')):.3f} | "
                                     f"{'-' if c is None else f'{c:.3f}'} | {s1} | {s64} |")
            if official:
                lines += ["", f"Official PyTorch MAR code (`scripts/bench/official_mar_bench.py`, same weights, batch {sb}):", ""]
                for k in a.num_iters:
                    if k and k >= L:
                        continue
                    r = self.results.get(f"{name}/official/b{sb}/k{k}")
                    label = "one token per step" if k == 0 else f"{k} steps"
                    if not r:
                        lines.append(f"- {label}: " + ("not measured yet" if a.official else "not run (no --official copy of the official code given)"))
                    elif "skipped" in r["stats"]:
                        lines.append(f"- {label}: skipped ({r['stats']['skipped']})")
                    else:
                        st = r["stats"]
                        mine = self.ips(f"{name}/target/b{sb}/k{k}")
                        ratio = f"; marspec target-only is {mine / st['images_per_second']:.2f}x that" if mine else ""
                        lines.append(f"- {label}: {st['images_per_second']:.3g} images/s on {st['device']} (torch {st['torch']}, "
                                     f"stand-ins: {', '.join(st['stand_ins']) or 'none'}){ratio}")
            lines.append("")
        if self.stopped:
            lines += ["*Incomplete: the time budget ran out; run the same command again to measure the rest.*", ""]
        with open(os.path.join(a.out, "gpu-bench.md"), "w") as f:
            f.write("\n".join(lines))


def ensure_packs(args):
    """Makes the random-weight packs that are missing. The target is MAR-H; where its pack
    cannot be made (over 2 GB it needs the onnx package: export_mar.py says so), MAR-L stands
    in, and the report names it."""
    args.random_target, args.random_draft = ("test_small", "test_tiny") if args.tiny else ("mar_huge", "mar_base")
    if "random" not in args.pairs:
        return
    vae = "test_tiny" if args.tiny else "kl16"

    def make(model):
        cmd = [args.python, os.path.join(SCRIPTS, "packs", "make_random_packs.py"), "--models", model, "--vae", vae, "--out", args.packs]
        if args.official:
            cmd.append("--checkpoint")
        if args.steps:
            cmd += ["--sampling-steps", str(args.steps)]
        return subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore")).returncode == 0

    if not make(args.random_draft):
        sys.exit(f"gpu_bench: could not make the {args.random_draft} pack (make_random_packs.py's message is above)")
    if not make(args.random_target):
        if args.tiny or not make("mar_large"):
            sys.exit(f"gpu_bench: could not make the {args.random_target} pack (make_random_packs.py's message is above)")
        print("gpu_bench: MAR-H's pack could not be made; MAR-L is the target instead", file=sys.stderr)
        args.random_target = "mar_large"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="tiny packs, few images, small sizes: a check that runs anywhere")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bin", default=os.path.join(ROOT, "bin", "marspec"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default=None, help="results folder (default out/gpu-pairs, or out/gpu-pairs-tiny)")
    ap.add_argument("--packs", default=os.path.join(ROOT, "out", "packs"))
    ap.add_argument("--pairs", default="embedded,random")
    ap.add_argument("--batches", default=None, help="target-only batch sizes (default 1,8,32,128; tiny 1,4)")
    ap.add_argument("--num-iters", default=None, help="AR steps: 0 = one token per step, 64 = MAR's schedule (default 0,64; tiny 0,8)")
    ap.add_argument("--gammas", default=None, help="default 4,8,16,32 (tiny 4,8)")
    ap.add_argument("--spec-batch", type=int, default=None, help="batch of the speculative rows (default 32; tiny 4)")
    ap.add_argument("--images", type=int, default=None, help="at least this many images per measurement (default 8; tiny 2)")
    ap.add_argument("--steps", type=int, default=None, help="diffusion steps (default: the packs' 100; tiny 5)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--official", default="", help="folder of the official MAR code (fetched by hand)")
    ap.add_argument("--time-budget", type=float, default=540, help="seconds; no new measurement starts after (0 = none)")
    args = ap.parse_args()
    args.passed = [x for i, x in enumerate(sys.argv[1:]) if x != "--python" and (i == 0 or sys.argv[i] != "--python")]
    t = args.tiny
    args.out = args.out or os.path.join(ROOT, "out", "gpu-pairs-tiny" if t else "gpu-pairs")
    args.batches = ints(args.batches or ("1,4" if t else "1,8,32,128"))
    args.num_iters = ints(args.num_iters or ("0,8" if t else "0,64"))
    args.gammas = ints(args.gammas or ("4,8" if t else "4,8,16,32"))
    args.spec_batch = args.spec_batch or (4 if t else 32)
    args.images = args.images if args.images is not None else (2 if t else 8)
    args.steps = args.steps if args.steps is not None else (5 if t else 0)
    args.pairs = args.pairs.split(",")
    if not os.path.exists(args.bin):
        sys.exit(f"gpu_bench: {args.bin} not found: build it with `go build -o bin/marspec ./cmd/marspec` (scripts/gpu/gpu_bench.sh does)")
    ensure_packs(args)
    b = Bench(args)
    b.measure()
    print(f"gpu_bench: {len(b.results)} measurements in {b.results_path}; report {os.path.join(args.out, 'gpu-bench.md')}"
          + (" (incomplete: run again)" if b.stopped else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
