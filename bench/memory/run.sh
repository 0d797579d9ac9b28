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
    # Stage 3 with the parameters outside the layers (the 545 MB tied
    # embedding and the final norm) in one bucket, gathered as one, as
    # FSDP2 gathers the root module (smaller buckets gather them apart).
    buckets=256
    [ "$zero" = 3 ] && buckets=600
    "$root/build/bin/tpc" "$work/graph.onnx" --weights "$work/model" --train \
      --dp 2 --tp "$tp" --zero "$zero" --bucket-mib "$buckets" --report \
      -o "$work/exe_tp${tp}_zero$zero" >/dev/null
  done
done
"$root/.venv/bin/python" "$root/bench/memory/run.py" "$work" "$@"
