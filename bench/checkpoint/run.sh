#!/usr/bin/env bash
# bench/checkpoint end to end: the model stack, the 0.5 B Qwen2.5-shaped
# model (make_model.py, git-ignored under build/), its graph-only export
# compiled for training at tp=1 and tp=2 against its HF checkpoint, then
# run.py: save and load times and memory against safetensors and
# torch.distributed.checkpoint.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/checkpoint}
"$root/bench/checkpoint/prepare.sh" "$work"
for tp in 1 2; do
  "$root/build/bin/tpc" "$work/graph.onnx" --weights "$work/model" --train \
    --tp "$tp" -o "$work/exe_tp$tp"
done
"$root/.venv/bin/python" "$root/bench/checkpoint/run.py" "$work/model" \
  "$work/exe_tp1/model" "$work/exe_tp2/model" "$work"
