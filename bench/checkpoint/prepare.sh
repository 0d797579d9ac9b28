#!/usr/bin/env bash
# The 0.5 B Qwen2.5-shaped model of bench/checkpoint and bench/memory in
# DIR (make_model.py: random weights, DIR/model) and its graph-only export
# (DIR/graph.onnx), each made once; the model stack and tpc built first.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$1
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
mkdir -p "$work"
[ -f "$work/model/model.safetensors.index.json" ] ||
  "$root/.venv/bin/python" "$root/bench/checkpoint/make_model.py" "$work/model"
[ -f "$work/graph.onnx" ] ||
  "$root/tools/tp-export/tp-export" "$work/model" -o "$work/graph.onnx"
