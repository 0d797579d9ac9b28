#!/usr/bin/env python3
"""What FP32 master weights change in bf16 training, against hand-derived
values (AdamW with weight decay 0 and learning rate LR):

  first W0 ONE LR: ONE saved one step from the weights W0 with master
    weights; AdamW's first step moves each element by lr * |g| / (|g| +
    eps), i.e. by lr wherever |g| >> eps: |master - w0| = lr within f32
    rounding for at least 90% of the elements.
  vanish W0 NONE MASTER: NONE and MASTER saved 10 steps from W0 without
    and with master weights, at lr 1e-5. A bf16 element with |w0| > 2^-8
    is at least 2^-15 from its neighbours, and one AdamW step moves it by
    at most 1.05 lr in the first 10 (bias-corrected moments:
    |m| / sqrt(v) <= sqrt(sum a_i^2 / b_i)), under half of that: without
    masters each step rounds back to it and every such element keeps its
    value; with masters the moves add up in f32 and at least a quarter of
    them change. (At exactly 2^-8 the neighbour below is 2^-16 away: those
    may move either way.)

Prints one line; exits non-zero when a bound fails."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from safetensors_f32 import read_safetensors  # noqa: E402


def load(directory, name):
    return read_safetensors(os.path.join(directory, name + ".safetensors"))


mode = sys.argv[1]
w0 = load(sys.argv[2], "model")
if mode == "first":
    lr = float(sys.argv[4])
    state = load(sys.argv[3], "optimizer")
    moves = np.concatenate([np.abs(state[k + ".master_weight"] - w0[k]).ravel()
                            for k in w0])
    exact = np.abs(moves - lr) <= 2e-4 * lr + 4e-9
    share = exact.mean()
    print(f"{'ok' if share >= 0.9 else 'FAIL'}: {share:.1%} of the "
          f"{moves.size} master elements moved by lr")
    sys.exit(0 if share >= 0.9 else 1)
none, master = load(sys.argv[3], "model"), load(sys.argv[4], "model")
large = {k: np.abs(v) > 2.0 ** -8 for k, v in w0.items()}
count = sum(m.sum() for m in large.values())
kept = sum((none[k][m] == w0[k][m]).sum() for k, m in large.items())
moved = sum((master[k][m] != w0[k][m]).sum() for k, m in large.items())
ok = kept == count and moved >= count / 4
print(f"{'ok' if ok else 'FAIL'}: of {count} weights with |w| > 2^-8, "
      f"{kept} kept without masters, {moved} changed with them")
sys.exit(0 if ok else 1)
