#!/usr/bin/env bash
# The real-data floor of docs/RESULTS.md: the Fashion-MNIST test set against the training set
# (N = 10,000), and three disjoint 2,000-image slices of the training set against the test-set
# reference that every generated row is scored against (the same N as the rows, so the same
# finite-sample bias). Needs Debian's dataset-fashion-mnist and python3-numpy, and bin/marspec.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 scripts/bench/dump_fmnist_png.py --split test --out "$tmp/test" >/dev/null
/usr/bin/python3 scripts/bench/dump_fmnist_png.py --split train --out "$tmp/train" >/dev/null
./bin/marspec fid --stats "$tmp/train" -o "$tmp/train_stats.npz" 2>/dev/null
echo "== test set (10,000) against the training set (60,000)"
./bin/marspec fid "$tmp/test" "$tmp/train_stats.npz" 2>/dev/null
for k in 0 1 2; do
  mkdir "$tmp/slice$k"
  ls "$tmp/train" | sort | sed -n "$((k * 2000 + 1)),$((k * 2000 + 2000))p" | sed "s|^|$tmp/train/|" | xargs cp -t "$tmp/slice$k"
  echo "== training images $((k * 2000))-$((k * 2000 + 1999)) against the embedded test-set statistics"
  ./bin/marspec fid "$tmp/slice$k" models/evaluator/fmnist_test_stats.npz 2>/dev/null
done
