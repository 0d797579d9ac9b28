#!/usr/bin/env python3
"""Compares two training runs: the steps both logged (--log JSON lines:
loss, grad_norm) and the checkpoints both saved (--save DIR: the weights
and the optimizer state, every tensor by name).

    compare_runs.py LOG_A LOG_B DIR_A DIR_B [--rtol R]

With --rtol 0 (the default) everything must be bit-identical; otherwise
|a - b| <= R * max(1, |b|) for each logged number and
||a - b|| <= R * max(1, ||b||) for each tensor. Prints one line; exits
non-zero on a difference."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from safetensors_f32 import read_safetensors  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("log_a")
p.add_argument("log_b")
p.add_argument("dir_a")
p.add_argument("dir_b")
p.add_argument("--rtol", type=float, default=0.0)
args = p.parse_args()


def steps(path):
    with open(path) as f:
        return {r["step"]: r for r in map(json.loads, f) if r}


a, b = steps(args.log_a), steps(args.log_b)
common = sorted(set(a) & set(b))
if not common:
    sys.exit(f"FAIL: the logs share no step ({sorted(a)} and {sorted(b)})")
worst = (0.0, "")
for s in common:
    for key in ("loss", "grad_norm"):
        x, y = a[s][key], b[s][key]
        diff = abs(x - y)
        if (args.rtol == 0 and x != y) or diff > args.rtol * max(1.0, abs(y)):
            sys.exit(f"FAIL: step {s} {key} {x!r} != {y!r}")
        worst = max(worst, (diff, f"step {s} {key}"))

tensors = 0
def state_file(directory, name):
    """NAME.safetensors.index.json, or NAME.safetensors when one file
    holds it all."""
    index = os.path.join(directory, name + ".safetensors.index.json")
    return index if os.path.exists(index) else os.path.join(
        directory, name + ".safetensors")


for index in ("model", "optimizer"):
    ta = read_safetensors(state_file(args.dir_a, index))
    tb = read_safetensors(state_file(args.dir_b, index))
    if sorted(ta) != sorted(tb):
        sys.exit(f"FAIL: {index}: different tensors: "
                 f"{sorted(set(ta) ^ set(tb))[:5]}")
    for name in ta:
        x, y = ta[name], tb[name]
        if args.rtol == 0:
            if x.tobytes() != y.tobytes():
                sys.exit(f"FAIL: {name} differs")
            continue
        diff = float(np.linalg.norm(x - y))
        if diff > args.rtol * max(1.0, float(np.linalg.norm(y))):
            sys.exit(f"FAIL: {name}: ||diff|| {diff:.3e}")
        worst = max(worst, (diff, name))
    tensors += len(ta)
kind = "bit-identical" if args.rtol == 0 else f"within {args.rtol:g}"
print(f"ok: steps {common[0]}-{common[-1]} and {tensors} tensors {kind}"
      + (f" (worst {worst[0]:.1e}: {worst[1]})" if args.rtol else ""))
