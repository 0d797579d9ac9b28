#!/usr/bin/env bash
# bench/forward end to end: set up the model stack, build the medium Llama,
# compile it with tpc, and time it against onnxruntime in one run.
# DTYPE=bf16 compiles ours with tpc --dtype bf16 (onnxruntime stays f32).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/forward}
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
[ -f "$work/model/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model"
dtype=${DTYPE:-auto}
"$root/build/bin/tpc" "$work/model/model.onnx" --dtype "$dtype" -o "$work/exe_$dtype"
"$root/.venv/bin/python" "$root/bench/forward/run.py" "$work/model" "$work/exe_$dtype/model" --dtype "$dtype" "$@"
