"""Write Fashion-MNIST images as PNG files (for reference statistics with `marspec fid --stats`).

  /usr/bin/python3 scripts/bench/dump_fmnist_png.py --split test --out /tmp/fmnist-test
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import fmnist
from lib.pngfile import write_png


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["train", "test"], default="test")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    images, labels = fmnist.load(args.split)
    os.makedirs(args.out, exist_ok=True)
    for i, (img, y) in enumerate(zip(images, labels)):
        write_png(os.path.join(args.out, f"{i:05d}_class{y}.png"), img)
    print(f"wrote {len(images)} images to {args.out}")


if __name__ == "__main__":
    main()
