#!/usr/bin/env bash
# bench/forward end to end: set up the model stack, build the medium Llama,
# compile it with tpc, and time it against onnxruntime in one run.
# DTYPE=bf16 compiles ours with tpc --dtype bf16 (onnxruntime stays f32).
set -euo pipefail
# shellcheck source=bench/forward/prepare.sh
source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"
dtype=${DTYPE:-auto}
"$root/build/bin/tpc" "$work/model/model.onnx" --dtype "$dtype" -o "$work/exe_$dtype"
"$root/.venv/bin/python" "$root/bench/forward/run.py" "$work/model" "$work/exe_$dtype/model" --dtype "$dtype" "$@"
