#!/usr/bin/env python3
"""Trains a compiled model (`model --train`) on a reference run's data and
compares it with that run (PyTorch: test/models/make_train.py):

  per step, |loss - ref| <= rtol * |ref| and the same for the grad norm;
  the first step's grad norm (the weights still PyTorch's) within
  first_norm_rtol: the norm of clip_grad_norm_ on the unsharded model,
  replicated gradients counted once;
  per parameter, ||w - ref|| <= wtol * ||ref|| for the saved weights.

The weights are compared norm-wise, not element by element: where a
gradient element is near AdamW's eps, its update m / (sqrt(v) + eps)
turns float32 rounding of the gradient into update differences of up to
lr (measured: 1.3e-5 absolute on a 0.018 weight, while every tensor is
within 1e-5 norm-wise).

Usage: compare_training.py EXE TRAIN_DIR [--mpirun N] [--rtol 1e-5] [--dp D]
       [--first-norm-rtol 1e-6]
       [--wtol 1e-4] [--steps S] [--device cpu|cuda] [--weights MODEL]
       [--autocast bf16] [--expect-dtype bf16]
TRAIN_DIR holds tokens.npy, mask.npy, reference.json and final.safetensors.
Prints one line per step and a summary; exits non-zero on a mismatch."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from safetensors_f32 import read_safetensors

p = argparse.ArgumentParser()
p.add_argument("exe")
p.add_argument("train_dir")
p.add_argument("--mpirun", type=int, default=0)
p.add_argument("--rtol", type=float, default=1e-5)
p.add_argument("--wtol", type=float, default=1e-4)
p.add_argument("--first-norm-rtol", type=float, default=1e-6)
p.add_argument("--device", default="cpu", help="the program's --device")
p.add_argument("--weights", help="the program's --weights (the model file elsewhere)")
p.add_argument("--autocast", help="the program's --autocast")
p.add_argument("--expect-dtype", choices=["bf16"],
               help="also require every saved weight to be a value of that type "
                    "(a program that holds its parameters in it)")
p.add_argument("--dp", type=int, default=1,
               help="the program's data-parallel groups: each runs "
               "grad_accum / dp of the reference's micro-batches")
args = p.parse_args()


ref = json.load(open(os.path.join(args.train_dir, "reference.json")))
steps = ref["steps"]
ok = True
with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "train.jsonl")
    save = os.path.join(tmp, "ckpt")
    cmd = [args.exe, "--train",
           "--data", os.path.join(args.train_dir, "tokens.npy"),
           "--data-mask", os.path.join(args.train_dir, "mask.npy"),
           "--steps", str(len(steps)),
           "--micro-batch", str(ref["micro_batch"]),
           "--grad-accum", str(ref["grad_accum"] // args.dp),
           "--lr", str(ref["lr"]), "--weight-decay", str(ref["weight_decay"]),
           "--log", log, "--save", save, "--device", args.device]
    if args.weights:
        cmd += ["--weights", args.weights]
    if args.autocast:
        cmd += ["--autocast", args.autocast]
    if "max_grad_norm" in ref:
        cmd += ["--max-grad-norm", str(ref["max_grad_norm"])]
    if args.mpirun:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(args.mpirun)] + cmd
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        print(f"FAIL: {args.exe} exited with {run.returncode}")
        sys.exit(1)
    got = [json.loads(line) for line in open(log)]
    weights = read_safetensors(save)
    # With LoRA the factors are in PEFT's file, under PEFT's names.
    adapter = os.path.join(save, "adapter_model.safetensors")
    if os.path.exists(adapter):
        for name, w in read_safetensors(adapter).items():
            weights[name.removeprefix("base_model.model.")] = w
    has_config = os.path.exists(os.path.join(save, "config.json"))

if len(got) != len(steps):
    print(f"FAIL: {len(got)} steps logged, {len(steps)} expected")
    sys.exit(1)
for g, r in zip(got, steps):
    for key in ("loss", "grad_norm"):
        err = abs(g[key] - r[key]) / abs(r[key])
        bound = args.rtol
        if key == "grad_norm" and r["step"] == 1:
            bound = min(bound, args.first_norm_rtol)
        good = err <= bound
        ok &= good
        print(f"{'ok' if good else 'FAIL'}: step {r['step']} {key} "
              f"{g[key]:.7f} vs {r[key]:.7f} (rel {err:.1e})")

final = read_safetensors(os.path.join(args.train_dir, "final.safetensors"))
worst, worst_name, worst_abs = 0.0, "", 0.0
for name, r in final.items():
    w = weights.get(name)
    if w is None or w.shape != r.shape:
        print(f"FAIL: saved weights lack {name}{list(r.shape)}")
        ok = False
        continue
    err = float(np.linalg.norm(w - r)) / max(float(np.linalg.norm(r)), 1e-30)
    worst_abs = max(worst_abs, float(np.abs(w - r).max()))
    if err > worst:
        worst, worst_name = err, name
extra = sorted(set(weights) - set(final))
if extra:
    print(f"FAIL: saved weights have extra tensors {extra}")
    ok = False
good = worst <= args.wtol
ok &= good
if args.expect_dtype:
    outside = sum(int(((w.view(np.uint32) & np.uint32(0xFFFF)) != 0).sum())
                  for w in weights.values())
    ok &= outside == 0
    print(f"{'ok' if outside == 0 else 'FAIL'}: {outside} saved weights are not "
          f"{args.expect_dtype} values")
print(f"{'ok' if good else 'FAIL'}: {len(final)} parameters, worst relative "
      f"difference {worst:.1e} ({worst_name}), max|diff| {worst_abs:.1e}"
      + ("" if has_config else "; no config.json saved"))
sys.exit(0 if ok else 1)
