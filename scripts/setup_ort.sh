#!/usr/bin/env bash
# Fetch ONNX Runtime's shared library (the version onnxruntime_go v1.27.0 is built against)
# from the npm registry's onnxruntime-node package into third_party/ (git-ignored).
set -euo pipefail
VERSION=1.24.1
cd "$(dirname "$0")/.."
dest=third_party/onnxruntime/libonnxruntime.so
if [ -s "$dest" ]; then
  exit 0
fi
# the npm package ships one build per platform; this project fetches linux/x64 only
if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
  echo "setup_ort: only Linux x86_64 is handled (this is $(uname -s) $(uname -m)); install ONNX Runtime $VERSION yourself and set MARSPEC_ORT_LIB" >&2
  exit 1
fi
command -v npm >/dev/null || { echo "setup_ort: npm is needed to fetch onnxruntime-node (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup_ort: fetching onnxruntime-node@$VERSION from the npm registry"
(cd "$tmp" && npm pack --silent "onnxruntime-node@$VERSION" >/dev/null) || { echo "setup_ort: npm pack onnxruntime-node@$VERSION failed (is the npm registry reachable? npm's own message is above)" >&2; exit 1; }
tar -xzf "$tmp"/onnxruntime-node-*.tgz -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1 \
  || { echo "setup_ort: the package has no linux/x64 libonnxruntime.so.1" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
cp "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$dest.part"
mv "$dest.part" "$dest"
echo "setup_ort: installed $dest"
