#!/usr/bin/env bash
# bench/train end to end: set up the model stack, build the medium Llama of
# bench/forward, compile its training step with tpc at tp=1 and tp=2, and
# time one optimizer step against PyTorch (eager, and DTensor TP) in one run.
# DTYPE=bf16 trains both sides in bf16 (tpc --dtype bf16, model.to(bf16)).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/train}
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
[ -f "$work/model/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model"
dtype=${DTYPE:-f32}
"$root/build/bin/tpc" "$work/model/model.onnx" --train --dtype "$dtype" -o "$work/exe_$dtype"
"$root/build/bin/tpc" "$work/model/model.onnx" --train --dtype "$dtype" --tp 2 -o "$work/exe_tp2_$dtype"
"$root/.venv/bin/python" "$root/bench/train/run.py" "$work/model" "$work/exe_$dtype/model" "$work/exe_tp2_$dtype/model" --dtype "$dtype" "$@"
