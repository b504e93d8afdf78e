"""Two precision frontier runs of the same presets and seeds, side by side: each configuration's
FID per seed in both, each int8 row against its fp32 twin in both, and the int8 rows of the
second run against the first's (docs/FRONTIER.md, "Does int8 cost quality?"). The fp32 rows
must agree to the last digit: the runs share every per-image noise, so only the int8 graphs
differ.

  python3 scripts/bench/int8_twins.py NEW_PREFIX OLD_PREFIX [SEEDS=1,2,3]

reads NEW_PREFIX{seed}/frontier.json and OLD_PREFIX{seed}/frontier.json, e.g.
  python3 scripts/bench/int8_twins.py docs/results/2026-11-27-int8-per-row/twins-seed \\
      docs/results/2026-11-26-precision-per-request/cfg1-seed
"""
import json
import statistics
import sys

SUFFIX = ":precision=int8"


def fids(prefix, seeds):
    out = {}
    for s in seeds:
        for r in json.load(open(f"{prefix}{s}/frontier.json"))["results"]:
            if not r.get("reference_second_sample"):
                out.setdefault(r["config"], {})[s] = r["fid"]
    return out


def row(values):
    return " / ".join(f"{v:+.3f}" for v in values) + f" | {statistics.mean(values):+.3f}"


def main(argv):
    new_prefix, old_prefix = argv[0], argv[1]
    seeds = [int(s) for s in (argv[2] if len(argv) > 2 else "1,2,3").split(",")]
    new, old = fids(new_prefix, seeds), fids(old_prefix, seeds)
    both = [c for c in new if c in old]
    same = [c for c in both if not c.endswith(SUFFIX) and all(new[c][s] == old[c][s] for s in seeds)]
    print(f"fp32 rows equal to the last digit in both runs: {len(same)} of {sum(not c.endswith(SUFFIX) for c in both)}")
    print("| int8 configuration | int8 - fp32, old (seeds) | mean | int8 - fp32, new (seeds) | mean | new int8 - old int8 (seeds) | mean |")
    print("|---|---|---|---|---|---|---|")
    for c in both:
        if not c.endswith(SUFFIX) or c[: -len(SUFFIX)] not in both:
            continue
        twin = c[: -len(SUFFIX)]
        was = [old[c][s] - old[twin][s] for s in seeds]
        now = [new[c][s] - new[twin][s] for s in seeds]
        moved = [new[c][s] - old[c][s] for s in seeds]
        print(f"| `{twin}` | {row(was)} | {row(now)} | {row(moved)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
