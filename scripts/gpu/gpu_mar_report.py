"""OUT/gpu-mar.md of scripts/gpu/gpu_mar.py: the section for docs/ (the card's name, images/s
per side, precision, head path and batch, the head's share, the ratios aimed at, fp16
parity, and each stage's budget and use). Rewritten after every result, so a run cut off still
leaves a readable section."""
import datetime
import os
import subprocess

from gpu.gpu_bench import device_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the aims for a GPU (3x the official code under bf16 autocast at batch 8, 2x at 64, the head under
# 40% of a generation), printed beside the measured values
AIM_RATIO = {8: 3.0, 64: 2.0}
AIM_HEAD_SHARE = 0.40


def cell(rec, value, notes=None):
    """A table cell for one result: value(stats), or why there is none (a long reason becomes a
    numbered note in notes, listed under the table, so a row stays readable)."""
    if not rec:
        return "not measured"
    if "stats" in rec:
        return value(rec["stats"])
    for kind, label in (("skipped", "skipped"), ("cut", "cut"), ("error", "failed")):
        if kind in rec:
            reason = " ".join(str(rec[kind]).split())[:300].replace("|", "/")
            if notes is None:
                return f"{label}: {reason}"
            if reason not in notes:
                notes.append(reason)
            return f"{label} [{notes.index(reason) + 1}]"
    return "?"


def ips(rec):
    return rec["stats"].get("images_per_second") if rec and "stats" in rec else None


def head_share(rec):
    return rec["stats"]["head_step"]["share"] if rec and "stats" in rec and "head_step" in rec["stats"] else None


def card_name(run):
    """nvidia-smi's name of the card (or the CPU's), and torch's where an official row ran."""
    name = device_name(run.args.device)
    torch_names = {r["stats"]["device"] for k, r in run.results.items() if k.startswith("official/") and "stats" in r}
    torch_names.discard("cpu")
    if torch_names:
        name += f" (torch.cuda.get_device_name: {', '.join(sorted(torch_names))})"
    return name


def write_report(run):
    a, res = run.args, run.results
    b1, b8, b64 = a.batches
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    torch_versions = sorted({r["stats"]["torch"] for k, r in res.items() if k.startswith("official/") and "stats" in r})
    shown = [x for i, x in enumerate(a.passed) if x != "--deadline" and (i == 0 or a.passed[i - 1] != "--deadline")]
    L = [f"### {'MAR-B' if not a.tiny else a.model} on {card_name(run)}: marspec against the official MAR code", "",
         f"`bash scripts/gpu/gpu_bench.sh {' '.join(shown)}` at commit {commit or '?'}, device `{a.device}`, "
         f"{datetime.date.today().isoformat()}"
         + (f", torch {', '.join(torch_versions)}" if torch_versions else "") + ". "
         f"Random-weight {a.model} (`make_random_packs.py`: the compute per pass is the model's, the images are not), "
         f"num_iter {a.num_iter}, {a.steps} diffusion steps, cfg {a.cfg:g} (linear schedule). Images/s of one batch "
         "(generation and decoding) after one untimed round (the whole batch on a GPU, one image on the CPU), each row one process: marspec `bench --parts --json`, the "
         "official code `scripts/bench/official_mar_bench.py` (its warm-up image at 4 AR steps). Head share: the wall "
         "time inside head calls (the fused graph's calls for the fused head). Heads: fused is the reverse diffusion "
         "in one call per AR step, as the graph unrolled for the run's step count (`unroll_head.py`, a session per "
         "power-of-two row count, opened before timing); graph is the same replayed as CUDA graphs "
         "(`MARSPEC_CUDA_GRAPH=on`); rolled is the same as an ONNX Loop; per-step is one head call per diffusion step; "
         "+cache adds the K/V cache across AR steps (`--cache`: LazyMAR-style, not the same images).", ""]
    if a.tiny:
        L += [f"**Tiny sizes on the {'CPU' if a.device == 'cpu' else a.device}** (`--tiny`): batches {b1}, {b8}, {b64} stand for 1, 8, 64; a check that every "
              "stage runs, not a GPU number.", ""]
    L += [f"| side | precision | head | batch {b1} | batch {b8} | batch {b64} | head share ({b1} / {b8} / {b64}) |",
          "|---|---|---|---|---|---|---|"]
    f3 = lambda st: f"{st['images_per_second']:.3g}"
    notes = []
    for kind, label in (("fp32", "fp32"), ("bf16", "bf16 autocast")):
        recs = [res.get(f"official/{kind}/b{b}") for b in a.batches]
        L.append(f"| official | {label} | PyTorch loop | " + " | ".join(cell(r, f3, notes) for r in recs) + " | |")
    for precision in ("fp32", "fp16"):
        for head in ("graph", "fused", "rolled", "per-step", "graph+cache"):
            recs = [res.get(f"marspec/{precision}/{head}/b{b}") for b in a.batches]
            if not any(recs):  # a row the run's stages never try at this precision
                continue
            keys = [f"marspec/{precision}/{head}/b{b}" for b in a.batches]
            shares = " / ".join(f"{100 * head_share(r):.1f}%" if head_share(r) is not None else "-" for r in recs)
            # "-": no stage of this run asks for that batch; "not measured": one did, without time left
            L.append(f"| marspec | {precision} | {head} | " + " | ".join(
                "-" if r is None and k not in run.tried else cell(r, f3, notes) for r, k in zip(recs, keys)) + f" | {shares} |")
    L += [""] + [f"- [{i + 1}] {n}" for i, n in enumerate(notes)] + ([""] if notes else [])
    L += ratio_lines(run) + [""] + parity_lines(run) + [""] + kernel_lines(run) + [""] + stream_lines(run) + [""] + pick_lines(run) + [""] + cache_kv_lines(run) + [""] + stage_lines(run) + [""]
    with open(os.path.join(a.out, "gpu-mar.md"), "w") as f:
        f.write("\n".join(L))


def best_marspec(res, batch, cache=False):
    """The fastest measured marspec row at batch, with or without the cache: (images/s, key) or
    (None, None). The cache changes the images, so the ratio to the official code is of rows
    without it."""
    rows = [(ips(r), k) for k, r in res.items()
            if k.startswith("marspec/") and k.endswith(f"/b{batch}") and ips(r) and ("+cache" in k) == cache]
    return max(rows) if rows else (None, None)


def row_name(key):
    return key.split("/", 1)[1].rsplit("/", 1)[0]


def ratio_lines(run):
    a, res = run.args, run.results
    L = ["Ratios (the aims in brackets):", ""]
    for b, full in zip(a.batches[1:], (8, 64)):
        base = ips(res.get(f"official/bf16/b{b}"))
        best, key = best_marspec(res, b)
        if base and best:
            line = (f"- batch {b}: marspec's fastest row without the cache ({row_name(key)}) against the official code "
                    f"under bf16 autocast: **{best / base:.2f}x** (aim {AIM_RATIO[full]:g}x)")
            share = head_share(res.get(key))
            if share is not None:
                line += f"; head share of that row {100 * share:.1f}% (aim under {100 * AIM_HEAD_SHARE:.0f}%)"
        else:
            why = cell(res.get(f"official/bf16/b{b}"), lambda st: "") if not base else "no marspec row measured"
            line = f"- batch {b}: no ratio ({why or 'not measured'})"
        L.append(line)
        off32 = ips(res.get(f"official/fp32/b{b}"))
        if off32 and best:
            L.append(f"- batch {b}: that row against the official code in fp32: {best / off32:.2f}x")
        cached, ckey = best_marspec(res, b, cache=True)
        if cached and base:
            L.append(f"- batch {b}: with the cache ({row_name(ckey)}): {cached / base:.2f}x the official code under bf16 autocast")
    step = head_share(res.get(f"marspec/fp32/per-step/b{a.batches[1]}"))
    if step is not None:
        L.append(f"- head share with the per-step head (fp32, batch {a.batches[1]}): {100 * step:.1f}%")
    return L


def parity_lines(run):
    PARITY_MEAN_LEVELS, PARITY_PIXEL_LEVELS, PARITY_SHARE = run.parity_tolerance
    res = run.results
    L = [f"Images compared (fused head, seed 5, batch {run.args.batches[1]}); tolerance stated before the run: per "
         f"image a mean |difference| of at most {PARITY_MEAN_LEVELS:g} grey levels of 255 and {PARITY_SHARE:.0%} of pixels "
         f"within {PARITY_PIXEL_LEVELS} levels:", ""]
    labels = {"parity/fp16-vs-fp32": "fp16 vs fp32",
              "parity/trained-fp16-vs-fp32/stream-fp32": "fp16 vs fp32 on the embedded target, a trained head (8 classes, cfg 3)",
              "parity/trained-fp16-vs-fp32/stream-fp16": "the same with the head's residual stream fp16 (`half_pack.py --head-stream fp16`)",
              "parity/graph-vs-plain": f"the fused head replayed as CUDA graphs vs not ({run.fast()})",
              "parity/check-fused-vs-per-step": "check of the comparison: fp32 fused vs per-step head",
              "parity/check-trained-packs": "check of the trained-head packs: fp32 images of both"}
    for k, label in labels.items():
        if "/check-" in k and not run.args.tiny:
            continue
        L.append(f"- {label}: " + cell(res.get(k), lambda st: (
            f"{st['within']} of {st['images']} images within tolerance; worst mean |difference| {st['worst_mean']:.3f} "
            f"levels, largest {st['worst_max']} levels, worst share within {PARITY_PIXEL_LEVELS} levels {st['worst_share']:.4f}")))
    return L


def kernel_lines(run):
    L = ["Nodes per diffusion step of the unrolled head after ONNX Runtime's own fusions (`MARSPEC_ORT_OPTIMIZED_DIR`; "
         "each optimised session's nodes over the step count, the once-per-call part counted in):", ""]
    for precision in ("fp16", "fp32"):
        rec = run.results.get(f"kernels/{precision}")
        if rec is None:
            continue
        L.append(f"- {precision}: " + cell(rec, lambda st: "; ".join(
            f"{h['session']} {h['per_step']:g} per step (" + ", ".join(f"{op} {c:g}" for op, c in list(h["ops_per_step"].items())[:10]) + ")"
            for h in st["heads"])))
        if rec.get("stats", {}).get("transformers"):
            L.append(f"- {precision}, the transformer per pass: " + "; ".join(
                f"{x['session']} {x['nodes']} nodes (" + ", ".join(f"{op} {c}" for op, c in list(x["ops"].items())[:8]) + ")"
                for x in rec["stats"]["transformers"]))
    return L


def stream_lines(run):
    """The head's time per AR step with its residual stream fp16 beside the default pack's, the
    same head path and batch: the difference is what the removed nodes cost."""
    b = run.args.batches[1]
    L = []
    for precision in ("fp16", "fp32"):
        rec = run.results.get(f"timing/{precision}/graph-head-stream-fp16/b{b}")
        if rec is None:
            continue
        ms = lambda r: r["stats"]["head_step"]["ms_per_call"]
        base = run.results.get(f"marspec/{precision}/graph/b{b}")
        line = (f"- {precision}, batch {b}, the replayed head with its residual stream fp16 (`half_pack.py --head-stream fp16`, "
                "a timing row: a random head's tokens outgrow fp16): " + cell(rec, lambda st: f"head {ms(rec):.1f} ms per AR step"))
        if rec and "stats" in rec and base and "stats" in base:
            line += f", against {ms(base):.1f} ms with the default stream ({ms(base) - ms(rec):+.1f} ms)"
        L.append(line)
    return (["The fp16 residual stream (nodes fewer per step, the same kernels otherwise):", ""] + L) if L else []


def switched_off_lines(run, batch, row, base_row, off, on, title, detail=lambda rec: ""):
    """A timing row with a path switched off (key timing/PRECISION/ROW/bBATCH) beside the
    measured row that has it on (marspec/PRECISION/BASE_ROW/bBATCH): images/s of each and
    their ratio, detail(rec) after each figure."""
    ips = lambda rec: rec["stats"]["images_per_second"]
    L = []
    for precision in ("fp16", "fp32"):
        key = f"timing/{precision}/{row}/b{batch}"
        if key not in run.results:
            continue
        rec, base = run.results[key], run.results.get(f"marspec/{precision}/{base_row}/b{batch}")
        line = f"- {precision}, batch {batch}, {off}: " + cell(rec, lambda st: f"{ips(rec):.3g} images/s{detail(rec)}")
        if "stats" in rec and base and "stats" in base:
            line += f"; {on}: {ips(base):.3g} images/s{detail(base)} ({ips(base) / ips(rec):.2f}x)"
        L.append(line)
    return ([title, ""] + L) if L else []


def pick_lines(run):
    """The replayed head at batch 64 with each pass handing back every row (MARSPEC_PICK_ROWS=off)
    beside the same row picking only the predicted ones."""
    return switched_off_lines(
        run, run.args.batches[2], "graph-pick-off", "graph",
        "the replayed head with every transformer pass handing back its whole z (`MARSPEC_PICK_ROWS=off`)",
        "picking the predicted rows", "Picking the rows a pass hands back (`docs/gpu.md`, IO binding):",
        detail=lambda rec: f", transformer {rec['stats']['transformer']['ms_per_call']:.1f} ms per pass")


def cache_kv_lines(run):
    """The replayed head with the cache at batch 8, its K/V in host memory
    (MARSPEC_CACHE_ON_DEVICE=off), beside the same row with them kept on the device."""
    return switched_off_lines(
        run, run.args.batches[1], "graph+cache-kv-host", "graph+cache",
        "the replayed head with the cache, its K/V in host memory (`MARSPEC_CACHE_ON_DEVICE=off`)",
        "kept on the device", "The cache's K/V kept on the device (`docs/cache.md`):")


def stage_lines(run):
    L = []
    off = run.results.get("preflight/pick-rows-off")
    if off:
        L += ["**Every marspec row ran with `MARSPEC_PICK_ROWS=off`**: a pass that hands back only the picked rows "
              "failed on this device in the preflight (" + " ".join(off["error"].split())[-300:] + ").", ""]
    host = run.results.get("cache/kv-in-host-memory")
    if host:
        L += ["**The cache rows ran with their K/V in host memory (`MARSPEC_CACHE_ON_DEVICE=off`)**: the cache kept "
              "on the device failed on this device (" + " ".join(host["error"].split())[-300:] + ").", ""]
    L += ["| stage | budget (s) | used (s) | status |", "|---|---|---|---|"]
    for name, budget in run.stage_budgets:
        s = run.stage_log.get(name)
        b = str(budget) if budget else "what is left"
        L.append(f"| {name} | {b} | {s['seconds'] if s else ''} | {s['status'] if s else 'not reached yet'} |")
    e = run.results.get("energy-head")
    L += ["", "Energy head (`scripts/gpu/gpu_energy_head.sh`): " + cell(e, lambda st: f"ran {st['minutes']} min, in "
                                                                        f"{os.path.join(run.args.out, 'energy-head')}")]
    return L
