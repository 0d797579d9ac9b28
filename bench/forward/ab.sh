#!/usr/bin/env bash
# Two builds of the medium Llama's forward, one tpc option apart, in
# alternating rounds: what one compiler change is worth, on a machine whose
# speed drifts. Usage: bench/forward/ab.sh "TPC FLAGS A" "TPC FLAGS B"
# (e.g. "" "--fuse-epilogues=false"); ROUNDS (7), ITERS (20); ENV_A and
# ENV_B, environment assignments for each side's runs (e.g.
# ENV_A=TPRT_GEMM=openblas ENV_B=TPRT_GEMM=onednn, with the same flags).
# TP=2: both sides compiled with --tp 2 and run as 2 MPI ranks x 1 thread
# (e.g. ENV_A=TPRT_ALLREDUCE=shm ENV_B=TPRT_ALLREDUCE=mpi).
# Prints, per threads x batch, each side's median forward time (median of
# ITERS runs, then over rounds) and the median of the per-round ratios A/B.
set -euo pipefail
# shellcheck source=bench/forward/prepare.sh
source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"
rounds=${ROUNDS:-7} iters=${ITERS:-20} tp=${TP:-1}
threadCounts="1 2" launch=()
if [ "$tp" != 1 ]; then
  threadCounts=1
  launch=(mpirun --allow-run-as-root --oversubscribe -np "$tp")
fi
# shellcheck disable=SC2086 # the flags are words
"$root/build/bin/tpc" "$work/model/model.onnx" --tp "$tp" $1 -o "$work/ab_a"
# shellcheck disable=SC2086
"$root/build/bin/tpc" "$work/model/model.onnx" --tp "$tp" $2 -o "$work/ab_b"
echo "A: tpc --tp $tp $1 ${ENV_A:-}"
echo "B: tpc --tp $tp $2 ${ENV_B:-}"
echo "| threads | batch | A (ms) | B (ms) | A / B (median of rounds) | per round |"
echo "|---|---|---|---|---|---|"
median() { "$root/.venv/bin/python" -c "import sys, numpy as np; print(f'{np.median([float(x) for x in sys.argv[1:]]):.2f}')" "$@"; }
for threads in $threadCounts; do
  for batch in 1 4; do
    make_ids "$batch"
    ta=() tb=() ratios=()
    for _ in $(seq "$rounds"); do
      # shellcheck disable=SC2086 # assignments as words
      a=$(env ${ENV_A:-} "${launch[@]}" "$work/ab_a/model" --input "$ids" --output "$work/ab_a.npy" --threads "$threads" --bench "$iters" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
      # shellcheck disable=SC2086
      b=$(env ${ENV_B:-} "${launch[@]}" "$work/ab_b/model" --input "$ids" --output "$work/ab_b.npy" --threads "$threads" --bench "$iters" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
      ta+=("$a") tb+=("$b")
      ratios+=("$("$root/.venv/bin/python" -c "print(f'{$a / $b:.3f}')")")
    done
    echo "| $threads | $batch | $(median "${ta[@]}") | $(median "${tb[@]}") | $(median "${ratios[@]}") | ${ratios[*]} |"
  done
done
