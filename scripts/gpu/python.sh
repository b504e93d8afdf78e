# Sourced by the scripts/gpu/*.sh scripts: torch_python NAME sets $python to the first python3
# with torch and onnx ($PYTHON if set; the Debian one here, /opt/torch's or whichever is on PATH on
# a lent GPU machine), or exits naming the script and what to install.
torch_python() {
  python=${PYTHON:-}
  local candidate
  for candidate in /usr/bin/python3 /opt/torch/.venv/bin/python3 python3; do
    [ -n "$python" ] && break
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch, onnx" 2>/dev/null; then
      python=$(command -v "$candidate")
    fi
  done
  [ -n "$python" ] || { echo "$1: no python3 with torch and onnx (apt-get install python3-torch python3-onnx, or set PYTHON)" >&2; exit 1; }
}
