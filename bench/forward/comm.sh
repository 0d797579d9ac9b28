#!/usr/bin/env bash
# Where a tp=2 rank's all-reduce time goes in bench/forward's medium Llama
# (2 ranks x 1 thread, seq 128, batch 1 and 4): allreduce_timer.c, preloaded
# into each rank, splits every all-reduce into the wait for the other rank
# (a barrier) and the all-reduce itself, the most that overlapping the
# collective with independent work (issue 15, item 4) could hide. Per
# forward pass (ITERS timed passes and the first), against the median pass
# of an undisturbed run. ROUNDS (3) runs per batch.
set -euo pipefail
# shellcheck source=bench/forward/prepare.sh
source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"
iters=${ITERS:-20} rounds=${ROUNDS:-3}
"$root/build/bin/tpc" "$work/model/model.onnx" --tp 2 -o "$work/exe_tp2"
mpicc -shared -fPIC -O2 "$root/bench/forward/allreduce_timer.c" -o "$work/liballreduce_timer.so"
# The timer sees MPI_Allreduce: the runtime's default all-reduce through
# shared memory (src/comm/SharedMemoryAllReduce.h) calls none.
run() { mpirun --allow-run-as-root --oversubscribe -np 2 -x TPRT_ALLREDUCE=mpi "$@" "$work/exe_tp2/model" --input "$ids" --output "$work/tp2.npy" --threads 1 --bench "$iters"; }
echo "| batch | forward (ms) | all-reduces per pass | MiB per pass | waiting for the other rank (ms per pass, rank 0 / 1) | all-reduce itself (ms per pass, rank 0 / 1) | all-reduce itself / forward |"
echo "|---|---|---|---|---|---|---|"
for batch in 1 4; do
  make_ids "$batch"
  for _ in $(seq "$rounds"); do
    plain=$(run | sed -nE 's/.*median ([0-9.]+) ms.*/\1/p')
    timed=$(run -x LD_PRELOAD="$work/liballreduce_timer.so" | grep '^allreduce-timer:' | sort)
    "$root/.venv/bin/python" - "$batch" "$plain" "$iters" "$timed" <<'PY'
import re, sys
batch, plain, iters, lines = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ranks = [tuple(map(float, re.search(r"(\d+) all-reduces, ([0-9.]+) MiB, waiting for the other rank ([0-9.]+) ms, all-reduce itself ([0-9.]+) ms", l).groups()))
         for l in lines.splitlines()]
passes = iters + 1
calls, mib = ranks[0][0] / passes, ranks[0][1] / passes
wait = " / ".join(f"{r[2] / passes:.2f}" for r in ranks)
own = " / ".join(f"{r[3] / passes:.2f}" for r in ranks)
share = max(r[3] for r in ranks) / passes / plain
print(f"| {batch} | {plain:.2f} | {calls:.1f} | {mib:.2f} | {wait} | {own} | {share:.3f} |")
PY
  done
done
