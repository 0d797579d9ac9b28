#!/usr/bin/env python3
"""Compares two checkpoints that `model --train --save` wrote (the same
model trained two ways; directories, indexes or safetensors files) tensor
by tensor, norm-wise:

  ||a - b|| <= rtol * ||b||  for every tensor both hold.

Prints the worst tensor and, with --list, every tensor beyond rtol; exits
non-zero when one is (or when the files hold different tensors).

Usage: compare_checkpoints.py A B [--rtol 1e-5]
       [--list]"""
import argparse
import sys

import numpy as np

from safetensors_f32 import read_safetensors

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--rtol", type=float, default=1e-5)
p.add_argument("--list", action="store_true")
args = p.parse_args()


a, b = read_safetensors(args.a), read_safetensors(args.b)
if sorted(a) != sorted(b):
    print(f"FAIL: the files hold different tensors: "
          f"{sorted(set(a) ^ set(b))}")
    sys.exit(1)
errors = {name: float(np.linalg.norm(a[name] - b[name])) /
          max(float(np.linalg.norm(b[name])), 1e-30) for name in sorted(a)}
worst = max(errors, key=errors.get)
beyond = [name for name, err in errors.items() if err > args.rtol]
if args.list:
    for name in beyond:
        print(f"differs: {name} (relative {errors[name]:.1e})")
print(f"{'FAIL' if beyond else 'ok'}: {len(errors)} tensors, "
      f"{len(beyond)} beyond {args.rtol:g}, worst {errors[worst]:.1e} "
      f"({worst})")
sys.exit(1 if beyond else 0)
