#!/usr/bin/env python3
"""Runs a compiled model on reference inputs and compares its logits with the
reference (an independent oracle: PyTorch or onnxruntime) at the positions
the attention mask keeps:

    max|diff| <= rtol * max(1, max|ref|)

Usage: compare_logits.py EXE REF_DIR TAG [--rtol 1e-4] [--weights W]
       [--no-mask] [--mpirun N] [--device cpu|cuda]
REF_DIR holds input_ids_TAG.npy, logits_TAG.npy and optionally
attention_mask_TAG.npy (or TAG names a shared-fixture input and logits file
pair with --ids/--logits). Prints one line and exits non-zero on mismatch."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("exe")
p.add_argument("--ids", required=True)
p.add_argument("--logits", required=True)
p.add_argument("--mask")
p.add_argument("--weights")
p.add_argument("--rtol", type=float, default=1e-4)
p.add_argument("--mpirun", type=int, default=0)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--device", default="cpu", help="the program's --device")
p.add_argument("--report-reads", action="store_true",
               help="also print the program's --report-reads line")
p.add_argument("--autocast", help="the program's --autocast")
p.add_argument("--mean-rtol", type=float,
               help="also bound the mean |diff| (relative to max(1, max |ref|)): where "
                    "bf16 rounding flips a few values, the max is noisy and the mean is not")
p.add_argument("--expect-dtype", choices=["bf16", "f16"],
               help="also require every logit to be a value of that type: a program "
                    "that computes in it rounds its last product's output to it")
args = p.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "logits.npy")
    cmd = [args.exe, "--input", args.ids, "--output", out, "--threads", str(args.threads),
           "--device", args.device]
    if args.mask:
        cmd += ["--attention-mask", args.mask]
    if args.weights:
        cmd += ["--weights", args.weights]
    if args.autocast:
        cmd += ["--autocast", args.autocast]
    if args.report_reads:
        cmd += ["--report-reads"]
    if args.mpirun:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.mpirun)] + cmd
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        print(f"FAIL: {args.exe} exited with {run.returncode}")
        sys.exit(1)
    got = np.load(out)
    for line in run.stdout.splitlines():
        if line.startswith("parameters read:"):
            print(line)

ref = np.load(args.logits)
if got.shape != ref.shape or got.dtype != np.float32:
    print(f"FAIL: logits {got.dtype}{list(got.shape)}, reference {ref.dtype}{list(ref.shape)}")
    sys.exit(1)
keep = np.ones(ref.shape[:2], dtype=bool)
if args.mask:
    keep = np.load(args.mask).astype(bool)
diffs = np.abs(got - ref)[keep]
diff = float(diffs.max())
scale = max(1.0, float(np.abs(ref[keep]).max()))
bound = args.rtol * scale
ok = diff <= bound
mean = ""
if args.mean_rtol is not None:
    ok &= float(diffs.mean()) <= args.mean_rtol * scale
    mean = f", mean|diff| {float(diffs.mean()):.3e} <= {args.mean_rtol * scale:.3e}"
if args.expect_dtype:
    narrow = got.astype(np.float16).astype(np.float32) if args.expect_dtype == "f16" \
        else (got.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    outside = int((narrow != got).sum())
    ok &= outside == 0
    mean += f", {outside} logits not {args.expect_dtype}"
status = "ok" if ok else "FAIL"
print(f"{status}: max|diff| {diff:.3e} <= {bound:.3e}{mean} over {int(keep.sum())} positions "
      f"({os.path.basename(args.logits)})")
sys.exit(0 if ok else 1)
