#!/usr/bin/env bash
# bench/forward at tp=2 (2 MPI ranks x 1 thread) against tp=1 (1 thread) on
# the medium Llama, seq 128, batch 1 and 4: median forward times (median of
# ITERS runs, then over ROUNDS alternating rounds), the speed-up, tp=1 on 2
# threads and tp=2's speed-up over it, and the largest logit difference
# between the two programs. Then an uneven split (tpc --allow-uneven): the
# medium Llama with 9 query heads over 3 KV heads (hidden 576), MLP 1407 and
# vocabulary 4095 at tp=2 (KV heads 2 + 1), beside the even model in the
# same rounds:
# each one's time at tp=2 over half its tp=1 time, and the uneven one's
# against the even one's, next to the imbalance the plan report predicts.
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

uneven="$work/uneven"
[ -f "$uneven/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$uneven" 4095 9 3 1407 >/dev/null
"$root/build/bin/tpc" "$uneven/model.onnx" -o "$work/exe_uneven"
"$root/build/bin/tpc" "$uneven/model.onnx" --tp 2 --allow-uneven --report -o "$work/exe_uneven_tp2" >/dev/null
imbalance=$(sed -nE 's/^Linear work per token per rank: .* \(([0-9.]+)x\)$/\1/p' "$work/exe_uneven_tp2/plan-report.md")
echo
echo "| batch 4 | tp=1 (ms) | tp=2 (ms) | tp=2 over half of tp=1 | predicted imbalance (linears) |"
echo "|---|---|---|---|---|"
make_ids 4
e1s="" e2s="" u1s="" u2s=""
time_of() { sed -E 's/.*median ([0-9.]+) ms.*/\1/'; }
for _ in $(seq "$rounds"); do
  e1s+=" $("$work/exe/model" --input "$ids" --output "$work/e1.npy" --threads 1 --bench "$iters" | time_of)"
  e2s+=" $(mpirun --allow-run-as-root --oversubscribe -np 2 "$work/exe_tp2/model" --input "$ids" --output "$work/e2.npy" --threads 1 --bench "$iters" | time_of)"
  u1s+=" $("$work/exe_uneven/model" --input "$ids" --output "$work/u1.npy" --threads 1 --bench "$iters" | time_of)"
  u2s+=" $(mpirun --allow-run-as-root --oversubscribe -np 2 "$work/exe_uneven_tp2/model" --input "$ids" --output "$work/u2.npy" --threads 1 --bench "$iters" | time_of)"
done
"$root/.venv/bin/python" -c "
import numpy as np
e1, e2, u1, u2 = (np.array(s.split(), float) for s in ('$e1s', '$e2s', '$u1s', '$u2s'))
d = np.abs(np.load('$work/u1.npy') - np.load('$work/u2.npy')).max()
even, odd = e2 / (e1 / 2), u2 / (u1 / 2)
print(f'| even (8 / 4 heads, MLP 1408, vocab 4096) | {np.median(e1):.2f} | {np.median(e2):.2f} | {np.median(even):.3f} | 1.000 |')
print(f'| uneven (9 / 3 heads, hidden 576, MLP 1407, vocab 4095) | {np.median(u1):.2f} | {np.median(u2):.2f} | {np.median(odd):.3f} | $imbalance |')
print(f'| uneven over even (per round) | | | {np.median(odd / even):.3f} ({\", \".join(f\"{x:.3f}\" for x in odd / even)}) | max abs diff tp=2 vs tp=1 {d:.1e} |')"
