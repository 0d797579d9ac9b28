#!/usr/bin/env bash
# bench/forward at tp=2 (2 MPI ranks x 1 thread) against tp=1 (1 thread) on
# the medium Llama, seq 128, batch 1 and 4: median forward times (median of
# ITERS runs, then over ROUNDS alternating rounds), the speed-up, tp=1 on 2
# threads and tp=2's speed-up over it, and the largest logit difference
# between the two programs.
set -euo pipefail
# shellcheck source=bench/forward/prepare.sh
source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"
iters=${ITERS:-20}
"$root/build/bin/tpc" "$work/model/model.onnx" -o "$work/exe"
"$root/build/bin/tpc" "$work/model/model.onnx" --tp 2 -o "$work/exe_tp2"
# The 2-core machine drifts (other load, frequency): tp=1 and tp=2 are
# measured in alternating rounds, and each round's speed-up compares two
# measurements taken seconds apart.
rounds=${ROUNDS:-5}
echo "| batch | tp=1, 1 thread (ms) | tp=2, 2 ranks x 1 thread (ms) | speed-up (median of rounds) | speed-up per round | tp=1, 2 threads (ms) | tp=2 against tp=1 on 2 threads | max abs diff |"
echo "|---|---|---|---|---|---|---|---|"
for batch in 1 4; do
  make_ids "$batch"
  t1s="" t2s="" t12s=""
  for _ in $(seq "$rounds"); do
    t1s+=" $("$work/exe/model" --input "$ids" --output "$work/tp1.npy" --threads 1 --bench "$iters" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')"
    t12s+=" $("$work/exe/model" --input "$ids" --output "$work/tp1.npy" --threads 2 --bench "$iters" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')"
    t2s+=" $(mpirun --allow-run-as-root --oversubscribe -np 2 "$work/exe_tp2/model" --input "$ids" --output "$work/tp2.npy" --threads 1 --bench "$iters" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')"
  done
  "$root/.venv/bin/python" -c "
import numpy as np
t1, t2 = np.array('$t1s'.split(), float), np.array('$t2s'.split(), float)
t12 = np.array('$t12s'.split(), float)
d = np.abs(np.load('$work/tp1.npy') - np.load('$work/tp2.npy')).max()
r = t1 / t2
print(f'| $batch | {np.median(t1):.2f} | {np.median(t2):.2f} | {np.median(r):.2f} | '
      + ', '.join(f'{x:.2f}' for x in r)
      + f' | {np.median(t12):.2f} | {np.median(t12 / t2):.2f} | {d:.1e} |')"
done
