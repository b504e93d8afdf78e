"""marspec against the official MAR code on the CPU, at real size, alternated in one run.

  /usr/bin/python3 scripts/packs/make_random_packs.py --models mar_base --checkpoint --out out/packs
  /usr/bin/python3 scripts/bench/realsize_cpu_bench.py --pack out/packs/mar-base --code out/official-mar

For each thread count, batch and CFG scale, the two sides run one after the other (marspec's
`bench --parts --json`, then scripts/bench/official_mar_bench.py --cpu on the same weights, same
num_iter and diffusion steps), --reps times, each side a process of its own after one untimed
warm-up image. Each side reports images/s, the time per transformer pass, head step and decode
(the official code's own methods, timed in place) and the time to open the pack or load the
checkpoints. FLOPs per part come from scripts/bench/realsize_flops.py; --gemm measures ONNX Runtime's
fp32 MatMul, the peak the parts are compared with. Results go to OUT/results.jsonl (appended)
and OUT/realsize.md (the tables for docs/BENCHMARKS.md).

--cache adds a third side, marspec with the cache across AR steps at its defaults (`bench --parts
--cache`, docs/cache.md), and writes the three sides' images/s, the ratios and each side's time
shares (transformer passes, head, decode) instead of the FLOP tables (the cache's lazy passes do
less than the schedule's FLOPs). At MAR's num_iter 64 and 256 a generation takes minutes, so
--no-warm drops both sides' untimed warm-up image:

  /usr/bin/python3 scripts/bench/realsize_cpu_bench.py --cache --no-warm --threads 1 --batches 1 \
      --cfgs 2.9 --num-iter 64 --reps 2 --out out/realsize/cache-b1
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


TABLE_HEADER = ["| threads | batch | cfg | marspec img/s | official img/s | ratio | transformer pass ms (m / o) | "
                "head step ms (m / o) | decode ms/img (m / o) | open s (m / o) |", "|---|---|---|---|---|---|---|---|---|---|"]


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"realsize_cpu_bench: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def thread_env(threads):
    """The thread settings for both sides. OMP_WAIT_POLICY=PASSIVE: Debian's PyTorch runs its
    OpenMP pool beside OpenBLAS's pthreads, and with both spinning on two cores the official
    code at two threads ran at a third of its speed (0.037 against 0.112 images/s at batch 1,
    measured 2026-11-25); the baseline gets its best setting."""
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def marspec(args, threads, batch, cfg, tuning="", suite=None, precision="fp32", cache=False):
    su = suite or real_suite(args)
    cmd = [args.marspec, "bench", "--parts", "--json", "--target", su["pack"], "--images", str(batch), "--batch", str(batch),
           "--num-iter", str(su["num_iter"]), "--steps", str(su["steps"]), "--cfg", str(cfg), "--rounds", "1",
           "--threads", str(threads)]
    if tuning:
        cmd += ["--ort-tuning", tuning]
    if precision != "fp32":
        cmd += ["--precision", precision]
    if cache:
        cmd += ["--cache"]
    if args.no_warm:
        cmd += ["--no-warm"]
    r = run_json(cmd, thread_env(threads))
    side = "marspec-cache" if cache else "marspec" if precision == "fp32" else "marspec-" + precision
    # with the cache, a transformer pass is a plain one (transformer.onnx) or a cached graph call
    passes = r["transformer"]["calls"] + r.get("cached_pass", {}).get("calls", 0)
    cached = r.get("cached_pass", {"calls": 0, "ms_per_call": 0.0, "share": 0.0})
    return {"side": side, "images_per_second": r["images_per_second"], "open_seconds": r["open_seconds"],
            "transformer_ms": r["transformer"]["ms_per_call"], "head_step_ms": r["head_step"]["ms_per_call"],
            "decode_ms": r["decode"]["ms_per_call"], "tuning": r["ort_tuning"],
            "plain_passes": r["transformer"]["calls"], "cached_passes": cached["calls"],
            "cached_pass_ms": cached["ms_per_call"], "transformer_pass_ms_all": (
                (r["transformer"]["calls"] * r["transformer"]["ms_per_call"] + cached["calls"] * cached["ms_per_call"]) / max(passes, 1)),
            "transformer_share": r["transformer"]["share"] + cached["share"], "head_share": r["head_step"]["share"],
            "decode_share": r["decode"]["share"], "cache": r.get("cache", "off"), "load_average": r.get("load_average")}


def official(args, threads, batch, cfg, suite=None):
    su = suite or real_suite(args)
    cmd = [sys.executable, os.path.join(HERE, "official_mar_bench.py"), "--code", args.code, "--model", su["model"],
           "--pack", su["pack"], "--batch", str(batch), "--images", str(batch), "--num-iter", str(su["num_iter"]),
           "--steps", str(su["steps"]), "--cfg", str(cfg), "--cpu", "--threads", str(threads),
           "--warmup", "0" if args.no_warm else "1"]
    if su.get("checkpoint"):
        cmd += ["--checkpoint", su["checkpoint"]]
    r = run_json(cmd, thread_env(threads))
    p = r["parts"]
    per_pass = (p["encoder"]["seconds"] + p["decoder"]["seconds"]) / p["encoder"]["calls"]
    # one p_sample_loop call is all diffusion steps of one AR step; the VAE decodes the batch at once
    decode = p["vae_decode"]["ms_per_call"] / batch if "vae_decode" in p else 0.0  # pixel tokens: nothing to decode
    share = lambda *names: sum(p[n]["seconds"] for n in names if n in p) / r["seconds"]
    return {"side": "official", "images_per_second": r["images_per_second"], "open_seconds": r["load_seconds"],
            "transformer_ms": 1000 * per_pass, "head_step_ms": p["head_loop"]["ms_per_call"] / su["steps"],
            "decode_ms": decode, "stand_ins": r["stand_ins"], "torch": r["torch"],
            "transformer_pass_ms_all": 1000 * per_pass, "plain_passes": p["encoder"]["calls"], "cached_passes": 0,
            "transformer_share": share("encoder", "decoder"), "head_share": share("head_loop"),
            "decode_share": share("vae_decode")}


def real_suite(args):
    return {"pack": args.pack, "model": args.model, "num_iter": args.num_iter, "steps": args.steps}


def toy_suite(args):
    """The embedded target at the fast preset's schedule against the official code on the same weights."""
    return {"pack": args.toy_pack, "model": "pack", "checkpoint": args.toy_checkpoint, "num_iter": 4, "steps": 25}


def side_by_side(args, suite, threads, batch, cfg, log, int8=False, cache=False):
    """Both sides (and marspec at int8, or with the cache, when asked), --reps times, rotating
    which goes first; returns the medians of each side, keyed by its name."""
    sides = [marspec, official]
    if int8:
        sides.append(lambda *a, **k: marspec(*a, precision="int8", **k))
    if cache:
        sides.append(lambda *a, **k: marspec(*a, cache=True, **k))
    got = {}
    for rep in range(args.reps):
        for side in sides[rep % len(sides):] + sides[:rep % len(sides)]:
            load_before, cpu_before, wall_before = os.getloadavg()[0], children_cpu_seconds(), time.perf_counter()
            r = side(args, threads, batch, cfg, suite=suite)
            # the CPU the side's process got over its life (opening included): on a shared
            # machine a side can get less than the one core it asks for
            cpu, wall = children_cpu_seconds() - cpu_before, time.perf_counter() - wall_before
            r.update(pack=suite["pack"], threads=threads, batch=batch, cfg=cfg, rep=rep, load_before=load_before,
                     process_cpu_seconds=cpu, process_wall_seconds=wall, process_cpu_share=cpu / wall,
                     load=os.getloadavg()[0], num_iter=suite["num_iter"], steps=suite["steps"],
                     finished=time.strftime("%H:%M:%S", time.gmtime()))
            log.write(json.dumps(r) + "\n")
            log.flush()
            got.setdefault(r["side"], []).append(r)
            print(json.dumps(r), file=sys.stderr)
    keys = ("images_per_second", "transformer_ms", "head_step_ms", "decode_ms", "open_seconds")
    if cache:
        keys += ("transformer_pass_ms_all", "transformer_share", "head_share", "decode_share", "plain_passes",
                 "cached_passes", "load_before", "load", "process_cpu_share")
    return {side: {k: med(rs, k) for k in keys} for side, rs in got.items()}


CACHE_HEADER = ["| threads | batch | num_iter | cfg | marspec img/s | marspec + cache img/s | official img/s | cache / marspec | "
                "cache / official | cache / stronger | passes (plain + cached) | transformer / head / decode share: marspec | "
                "marspec + cache | official | load (before, after) | CPU per wall second (m / c / o) |", "|---" * 16 + "|"]


def children_cpu_seconds():
    """User and system CPU seconds of the finished child processes so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cache_row(threads, batch, num_iter, cfg, m, c, o):
    """One setting of the three sides; the stronger baseline is the faster of marspec
    uncached and the official code."""
    pct = lambda r: f"{100 * r['transformer_share']:.1f} / {100 * r['head_share']:.1f} / {100 * r['decode_share']:.1f} %"
    ips = lambda r: r["images_per_second"]
    loads = [r[k] for r in (m, c, o) for k in ("load_before", "load")]
    return (f"| {threads} | {batch} | {num_iter} | {cfg:g} | {ips(m):.4g} | {ips(c):.4g} | {ips(o):.4g} | "
            f"**{ips(c) / ips(m):.2f}x** | **{ips(c) / ips(o):.2f}x** | **{ips(c) / max(ips(m), ips(o)):.2f}x** | "
            f"{c['plain_passes']:.0f} + {c['cached_passes']:.0f} | {pct(m)} | {pct(c)} | {pct(o)} | "
            f"{min(loads):.2f} to {max(loads):.2f} | {m['process_cpu_share']:.2f} / {c['process_cpu_share']:.2f} / "
            f"{o['process_cpu_share']:.2f} |")


def table_row(threads, batch, cfg, m, o):
    return (f"| {threads} | {batch} | {cfg:g} | {m['images_per_second']:.4g} | {o['images_per_second']:.4g} | "
            f"**{m['images_per_second'] / o['images_per_second']:.2f}x** | {m['transformer_ms']:.4g} / {o['transformer_ms']:.4g} | "
            f"{m['head_step_ms']:.3g} / {o['head_step_ms']:.3g} | {m['decode_ms']:.4g} / {o['decode_ms']:.4g} | "
            f"{m['open_seconds']:.2g} / {o['open_seconds']:.2g} |")


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", default="out/packs/mar-base", help="a make_random_packs.py --checkpoint pack")
    ap.add_argument("--code", default="out/official-mar", help="a copy of the official MAR code (models/, diffusion/)")
    ap.add_argument("--model", default="mar_base")
    ap.add_argument("--marspec", default=os.path.join(ROOT, "bin", "marspec"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--cfgs", default="1,3")
    ap.add_argument("--num-iter", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--reps", type=int, default=1, help="alternated repetitions per setting (medians reported)")
    ap.add_argument("--tunings", default="", help="also time marspec alone at batch 1, CFG 1, under each ORT tuning "
                    "(';'-separated --ort-tuning values, 'default' for none), alternated")
    ap.add_argument("--gemm", default="", help="MxKxN: ONNX Runtime's fp32 MatMul peak at each thread count")
    ap.add_argument("--int8", action="store_true", help="also run marspec at --precision int8 (the pack quantised by "
                    "scripts/packs/quantize_pack.py) in each alternation")
    ap.add_argument("--toy-pack", default="models/target")
    ap.add_argument("--toy-checkpoint", default="", help="also compare at toy size: the checkpoint ckpt_from_pack.py "
                    "rebuilt from --toy-pack (e.g. runs/target-rebuilt/checkpoint-last.pth)")
    ap.add_argument("--toy-batches", default="1,64")
    ap.add_argument("--out", default="out/realsize")
    ap.add_argument("--cache", action="store_true", help="add a third side, marspec with the cache across AR steps "
                    "(bench --parts --cache, the cache's defaults), and write the three sides' table instead of the FLOP tables")
    ap.add_argument("--no-warm", action="store_true", help="no untimed warm-up image on either side (marspec --no-warm, "
                    "official --warmup 0): at num_iter 64 and above it takes minutes")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.cache:
        cache_main(args)
        return
    flops = run_json([sys.executable, os.path.join(HERE, "realsize_flops.py"), "--model", args.model,
                      "--num-iter", str(args.num_iter)], dict(os.environ))
    log = open(os.path.join(args.out, "results.jsonl"), "a")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = [f"Run {started} on {platform.machine()}, {os.cpu_count()} CPUs ({cpu_name()}); {args.model} random weights, "
          f"num_iter {args.num_iter}, {args.steps} diffusion steps; {args.reps} alternated repetition(s), medians.", ""]
    md += TABLE_HEADER
    gflops_rows, int8_rows = [], []
    thread_counts = [int(t) for t in args.threads.split(",")]
    for threads in thread_counts:
        for batch in [int(b) for b in args.batches.split(",")]:
            for cfg in [float(c) for c in args.cfgs.split(",")]:
                res = side_by_side(args, real_suite(args), threads, batch, cfg, log, int8=args.int8)
                m, o = res["marspec"], res["official"]
                md.append(table_row(threads, batch, cfg, m, o))
                if "marspec-int8" in res:
                    int8_rows.append("| int8 " + table_row(threads, batch, cfg, res["marspec-int8"], o))
                rows = 2 * batch if cfg != 1 else batch  # guidance runs the unconditional rows too
                gflops_rows.append((threads, batch, cfg, rows, m, o))
    md += ["", "Achieved GFLOP/s (FLOPs from scripts/bench/realsize_flops.py; the transformer at the schedule's mean pass, "
           f"{flops['transformer_gflop_mean_pass']:.1f} GFLOP per image row; a head step at the schedule's mean tokens per AR step):", "",
           "| threads | batch | cfg | transformer (m / o) | head step (m / o) | decode (m / o) |", "|---|---|---|---|---|---|"]
    mean_tokens = flops["seq_len"] / args.num_iter  # a head step samples one AR step's tokens
    for threads, batch, cfg, rows, m, o in gflops_rows:
        tr = flops["transformer_gflop_mean_pass"] * rows
        hd = flops["head_gflop_per_token_step"] * mean_tokens * rows
        dc = flops["decode_gflop_per_image"]
        g = lambda gf, ms_: gf / (ms_ / 1000)
        md.append(f"| {threads} | {batch} | {cfg:g} | {g(tr, m['transformer_ms']):.0f} / {g(tr, o['transformer_ms']):.0f} | "
                  f"{g(hd, m['head_step_ms']):.0f} / {g(hd, o['head_step_ms']):.0f} | {g(dc, m['decode_ms']):.0f} / {g(dc, o['decode_ms']):.0f} |")
    if int8_rows:
        md += ["", "marspec at int8 (--precision int8, scripts/packs/quantize_pack.py) in the same alternation, against the same "
               "official fp32 runs:", "", "| precision " + TABLE_HEADER[0], "|---" + TABLE_HEADER[1]] + int8_rows
    if args.gemm:
        md += [""]
        for threads in thread_counts:
            cmd = [args.marspec, "bench", "--parts", "--json", "--images", "1", "--rounds", "1", "--num-iter", "2", "--steps", "1",
                   "--threads", str(threads), "--gemm", args.gemm]
            gm = run_json(cmd, thread_env(threads))["gemm"]
            log.write(json.dumps({"gemm": gm, "threads": threads}) + "\n")
            md.append(f"fp32 GEMM peak, ONNX Runtime MatMul {args.gemm}, {threads} thread(s): {gm['GFLOPs']:.1f} GFLOP/s ({gm['MsPerCall']:.1f} ms)")
    if args.tunings:
        md += ["", "ONNX Runtime tuning, marspec alone, batch 1, CFG 1, alternated:", "",
               "| threads | tuning | img/s | transformer ms | head step ms | decode ms |", "|---|---|---|---|---|---|"]
        tunings = [t.strip() for t in args.tunings.split(";")]
        for threads in thread_counts:
            res = {t: [] for t in tunings}
            for rep in range(args.reps):
                for t in tunings:
                    r = marspec(args, threads, 1, 1.0, "" if t == "default" else t)
                    r.update(threads=threads, rep=rep, load=os.getloadavg()[0])
                    log.write(json.dumps(r) + "\n")
                    res[t].append(r)
            for t in tunings:
                rs = res[t]
                md.append(f"| {threads} | {t} | {med(rs, 'images_per_second'):.4f} | {med(rs, 'transformer_ms'):.0f} | "
                          f"{med(rs, 'head_step_ms'):.1f} | {med(rs, 'decode_ms'):.0f} |")
    if args.toy_checkpoint:
        md += ["", f"Toy size: {args.toy_pack} at the fast preset's schedule (num_iter 4, 25 diffusion steps), one thread, "
               "against the official code on the same weights (scripts/packs/ckpt_from_pack.py):", ""] + TABLE_HEADER
        for batch in [int(b) for b in args.toy_batches.split(",")]:
            for cfg in [float(c) for c in args.cfgs.split(",")]:
                res = side_by_side(args, toy_suite(args), 1, batch, cfg, log)
                md.append(table_row(1, batch, cfg, res["marspec"], res["official"]))
    md += ["", f"FLOPs: transformer {flops['transformer_gflop_mean_pass']:.1f} GFLOP per row at the mean pass "
           f"({flops['transformer_gflop_full_sequence']:.1f} over the full sequence), head {1000 * flops['head_gflop_per_token_step']:.1f} "
           f"MFLOP per token and step, decode {flops['decode_gflop_per_image']:.0f} GFLOP per image."]
    with open(os.path.join(args.out, "realsize.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def cache_main(args):
    """--cache: marspec uncached, marspec with the cache and the official code, alternated."""
    log = open(os.path.join(args.out, "results.jsonl"), "a")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = [f"Run {started} on {platform.machine()}, {os.cpu_count()} CPUs ({cpu_name()}); {args.model} random weights, "
          f"num_iter {args.num_iter}, {args.steps} diffusion steps, fp32; the cache at its defaults; {args.reps} alternated "
          f"repetition(s), medians{'; no warm-up image' if args.no_warm else ''}.", ""] + CACHE_HEADER
    for threads in [int(t) for t in args.threads.split(",")]:
        for batch in [int(b) for b in args.batches.split(",")]:
            for cfg in [float(c) for c in args.cfgs.split(",")]:
                res = side_by_side(args, real_suite(args), threads, batch, cfg, log, cache=True)
                md.append(cache_row(threads, batch, args.num_iter, cfg, res["marspec"], res["marspec-cache"], res["official"]))
    with open(os.path.join(args.out, "realsize.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
