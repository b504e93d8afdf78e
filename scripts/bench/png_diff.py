"""Pixel differences between two folders of generated images, matched by file name.

  /usr/bin/python3 scripts/bench/png_diff.py LABEL DIR_A DIR_B

Prints per image the mean absolute and the largest difference (0-255) and the share of
pixels that differ: the benchmark scripts that run one image two ways (cpu_cache_int8_rounds.sh,
cpu_fused_head_rounds.sh) report with it.
"""
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder
from lib.pngfile import read_png  # noqa: E402


def main(label, a_dir, b_dir):
    for f in sorted(glob.glob(os.path.join(a_dir, "*.png"))):
        a = read_png(f).astype(np.int64)
        b = read_png(os.path.join(b_dir, os.path.basename(f))).astype(np.int64)
        d = np.abs(a - b).reshape(a.shape[0], a.shape[1], -1)  # [H, W, channels], grey as one
        print(f"{label}, {os.path.basename(f)}: mean abs pixel difference {d.mean():.3f}, largest {d.max()}, "
              f"pixels differing {(d > 0).any(axis=-1).mean():.4%} (0-255)")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
