#!/usr/bin/env bash
# bench/memory end to end: the model stack, the 0.5 B Qwen2.5-shaped model
# of bench/checkpoint (make_model.py: random weights, git-ignored under
# build/), its graph-only export compiled for training at dp=2 x tp=1 and
# dp=2 x tp=2 with --zero 0, 1, 2 and 3, then run.py: peak resident memory
# per rank and step time of 2 AdamW steps against PyTorch FSDP2 (+ DTensor
# TP) on gloo, in one run. About 40 GiB of memory in all, one configuration
# at a time (at most 20 GiB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/memory}
"$root/bench/checkpoint/prepare.sh" "$work"
for tp in 1 2; do
  for zero in 0 1 2 3; do
    # The default buckets: under --zero 3 the tied embedding (larger than
    # a bucket) is one of its own, which the loss and its gradient read
    # from the runs a block of rows at a time (tp-stream-param-runs).
    "$root/build/bin/tpc" "$work/graph.onnx" --weights "$work/model" --train \
      --dp 2 --tp "$tp" --zero "$zero" --report \
      -o "$work/exe_tp${tp}_zero$zero" >/dev/null
  done
done
"$root/.venv/bin/python" "$root/bench/memory/run.py" "$work" "$@"
