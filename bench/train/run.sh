#!/usr/bin/env bash
# bench/train end to end: set up the model stack, build the medium Llama of
# bench/forward, compile its training step with tpc at tp=1 and tp=2, and
# time one optimizer step against PyTorch (eager, and DTensor TP) in one run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/train}
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
[ -f "$work/model/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model"
"$root/build/bin/tpc" "$work/model/model.onnx" --train -o "$work/exe"
"$root/build/bin/tpc" "$work/model/model.onnx" --train --tp 2 -o "$work/exe_tp2"
"$root/.venv/bin/python" "$root/bench/train/run.py" "$work/model" "$work/exe/model" "$work/exe_tp2/model" "$@"
