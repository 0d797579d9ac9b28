#!/usr/bin/env bash
# Two builds of the medium Llama's training step, one tpc option apart, in
# alternating rounds: what one compiler change is worth to the step's time
# and peak memory. Usage: bench/train/ab.sh "TPC FLAGS A" "TPC FLAGS B"
# (e.g. "" "--fuse-linear-cross-entropy=false"); VOCAB (4096; 32000 is
# Llama-2's), SEQ (128, the sequence length), THREADS (1), ROUNDS (5);
# ENV_A and ENV_B, environment assignments for each side's runs (e.g.
# ENV_A=TPRT_GEMM=openblas ENV_B=TPRT_GEMM=onednn, with the same flags);
# RANKS (1): more runs each side under mpirun (the flags then say --tp
# RANKS). Results: bench/train/README.md. Each run: 4 AdamW
# steps of 2 micro-batches x 4 sequences of SEQ; steps 2 to 4 are timed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
vocab=${VOCAB:-4096} seq=${SEQ:-128} threads=${THREADS:-1} rounds=${ROUNDS:-5} ranks=${RANKS:-1}
launch=()
[ "$ranks" -gt 1 ] && launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
work=${BENCH_DIR:-$root/build/bench/train}/ab_v$vocab
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
[ -f "$work/model/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model" "$vocab"
# shellcheck disable=SC2086 # the flags are words
"$root/build/bin/tpc" "$work/model/model.onnx" --train $1 -o "$work/a"
# shellcheck disable=SC2086
"$root/build/bin/tpc" "$work/model/model.onnx" --train $2 -o "$work/b"
"$root/.venv/bin/python" -c "import numpy as np; np.save('$work/tokens.npy', np.random.default_rng(0).integers(0, $vocab, (32, $seq)).astype(np.int64))"
run() { # env assignments, program -> "ms_per_step peak_rss_mib step1_loss"
  local out
  # shellcheck disable=SC2086 # assignments as words
  out=$(env $1 "${launch[@]}" "$2" --train --data "$work/tokens.npy" --steps 4 --micro-batch 4 --grad-accum 2 \
    --lr 1e-3 --weight-decay 0.01 --threads "$threads" --log "$work/log.jsonl")
  "$root/.venv/bin/python" - "$work/log.jsonl" "$out" "$seq" <<'PY'
import json, re, sys
steps = [json.loads(line) for line in open(sys.argv[1])]
tokens = 8 * int(sys.argv[3])  # 2 micro-batches x 4 sequences
ms = sorted(1e3 * tokens / s["tokens_per_s"] for s in steps[1:])[len(steps[1:]) // 2]
rss = float(re.search(r"peak RSS ([0-9.]+) MiB", sys.argv[2]).group(1))
print(f"{ms:.1f} {rss:.0f} {steps[0]['loss']:.6f}")
PY
}
echo "A: tpc --train $1 ${ENV_A:-}"
echo "B: tpc --train $2 ${ENV_B:-}"
echo "vocab $vocab, sequence $seq, $ranks rank(s) x $threads thread(s), $rounds alternating rounds"
echo "| round | A ms/step | B ms/step | A / B | A peak RSS (MiB) | B peak RSS (MiB) | step-1 loss A / B |"
echo "|---|---|---|---|---|---|---|"
ratios=()
for round in $(seq "$rounds"); do
  read -r ta ra la < <(run "${ENV_A:-}" "$work/a/model")
  read -r tb rb lb < <(run "${ENV_B:-}" "$work/b/model")
  ratio=$("$root/.venv/bin/python" -c "print(f'{$ta / $tb:.3f}')")
  ratios+=("$ratio")
  echo "| $round | $ta | $tb | $ratio | $ra | $rb | $la / $lb |"
done
echo "median A / B: $("$root/.venv/bin/python" -c "import sys, numpy as np; print(f'{np.median([float(x) for x in sys.argv[1:]]):.3f}')" "${ratios[@]}")"
