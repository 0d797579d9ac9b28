#!/usr/bin/env python3
"""bench/train: one optimizer step (K=2 micro-batches of batch 4, sequence
128, AdamW) of the medium Llama, the tpc-compiled program against PyTorch
on the same model and data, in alternating rounds:

  tp=1 with 1 and 2 threads      vs torch eager with the same threads
  tp=2 (2 ranks x 1 thread)      vs PyTorch DTensor TP (parallelize_module,
                                    the Llama plan, gloo, 2 processes x 1 thread)

Prints a table of median step times (the first step of each run, which
reads the weights, left out), their ratio (ours / PyTorch; <= 1.0 means no
slower), peak RSS per rank, and the first step's loss on both sides.

    run.py MODEL_DIR EXE_TP1 EXE_TP2 [--rounds R] [--steps S] [--dtype f32|bf16]

With --dtype bf16 the executables were compiled with tpc --dtype bf16 and
PyTorch trains model.to(torch.bfloat16)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("model_dir")
p.add_argument("exe_tp1")
p.add_argument("exe_tp2")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
args = p.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
B, K, SEQ = 4, 2, 128


def ours(exe, data, threads, ranks, log):
    cmd = [exe, "--train", "--data", data, "--steps", str(args.steps),
           "--micro-batch", str(B), "--grad-accum", str(K), "--lr", "1e-3",
           "--weight-decay", "0.01", "--threads", str(threads), "--log", log]
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    steps = [json.loads(line) for line in open(log)]
    rss = float(re.search(r"peak RSS ([0-9.]+) MiB", out).group(1))
    return {"seconds": [B * K * SEQ / s["tokens_per_s"] for s in steps],
            "losses": [s["loss"] for s in steps], "peak_rss_mib": rss}


def torch_run(mode, data, threads):
    cmd = [sys.executable, os.path.join(here, "torch_step.py"), mode,
           args.model_dir, data, "--steps", str(args.steps), "--threads",
           str(threads), "--micro-batch", str(B), "--grad-accum", str(K),
           "--dtype", args.dtype]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


rows = [("tp=1, 1 thread", "torch eager, 1 thread", 1, 1, "eager"),
        ("tp=1, 2 threads", "torch eager, 2 threads", 2, 1, "eager"),
        ("tp=2, 2 ranks x 1 thread", "DTensor TP, 2 x 1 thread", 1, 2,
         "dtensor")]
results = {row[0]: {"ours": [], "torch": [], "rss": None, "loss": None}
           for row in rows}
with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "tokens.npy")
    rng = np.random.default_rng(0)
    np.save(data, rng.integers(0, 4096, size=(B * K * args.steps, SEQ),
                               dtype=np.int64))
    log = os.path.join(tmp, "train.jsonl")
    for _ in range(args.rounds):
        for name, _, threads, ranks, mode in rows:
            exe = args.exe_tp1 if ranks == 1 else args.exe_tp2
            a = ours(exe, data, threads, ranks, log)
            b = torch_run(mode, data, threads)
            r = results[name]
            r["ours"] += a["seconds"][1:]
            r["torch"] += b["seconds"][1:]
            r["rss"] = (a["peak_rss_mib"], b["peak_rss_mib"])
            r["loss"] = (a["losses"][0], b["losses"][0])

print(f"bench/train: medium Llama (hidden 512, 4 layers, 8/4 heads, MLP 1408, "
      f"vocab 4096), one AdamW step of {K} micro-batches x batch {B} x seq "
      f"{SEQ}; median over {args.rounds} alternating rounds of "
      f"{args.steps - 1} timed steps"
      + (f"; both sides in {args.dtype}" if args.dtype != "f32" else ""))
print("| program | peer | ours (ms/step) | peer (ms/step) | ratio ours/peer "
      "| peak RSS per rank, ours / peer (MiB) | step-1 loss, ours / peer |")
print("|---|---|---|---|---|---|---|")
for name, peer, *_ in rows:
    r = results[name]
    o, t = 1e3 * np.median(r["ours"]), 1e3 * np.median(r["torch"])
    print(f"| {name} | {peer} | {o:.0f} | {t:.0f} | {o / t:.2f} | "
          f"{r['rss'][0]:.0f} / {r['rss'][1]:.0f} | "
          f"{r['loss'][0]:.5f} / {r['loss'][1]:.5f} |")
