#!/usr/bin/env python3
"""bench/forward: the tpc-compiled executable against onnxruntime (CPU
execution provider, graph optimizations on, the same intra-op thread count)
on the same ONNX model, in one run, each in its own process, in alternating
rounds (the machine's speed drifts). Prints a table of median forward times
(the median over rounds of each round's median), their ratio (ours /
onnxruntime; <= 1.0 means no slower) and each round's ratio, and each
process's peak RSS (onnxruntime's includes the Python interpreter and numpy
it runs in).

    run.py MODEL_DIR EXE [--iters N] [--rounds N] [--threads 1 2] [--batches 1 4] [--seq 128]
           [--autocast f32|bf16] [--dtype auto|f32|bf16|f16]

MODEL_DIR holds model.onnx (bench/forward/make_model.py); EXE is
`tpc MODEL_DIR/model.onnx -o DIR`'s DIR/model."""
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
p.add_argument("exe")
p.add_argument("--iters", type=int, default=20)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--autocast", choices=["f32", "bf16"], default="f32",
               help="the executable's --autocast (onnxruntime stays float32)")
p.add_argument("--dtype", default="auto",
               help="the type EXE was compiled for (tpc --dtype; for the table's title)")
p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
p.add_argument("--batches", type=int, nargs="+", default=[1, 4])
p.add_argument("--seq", type=int, default=128)
args = p.parse_args()
model = os.path.join(args.model_dir, "model.onnx")

rows = []
with tempfile.TemporaryDirectory() as tmp:
    for threads in args.threads:
        for batch in args.batches:
            rng = np.random.default_rng(batch)
            ids = rng.integers(0, 4096, size=(batch, args.seq), dtype=np.int64)
            mask = np.ones_like(ids)

            # Each round runs ours, then onnxruntime, each in its own
            # process (onnxruntime's thread pool spins after each run).
            ids_path = os.path.join(tmp, "ids.npy")
            mask_path = os.path.join(tmp, "mask.npy")
            out_path = os.path.join(tmp, "out.npy")
            ref_path = os.path.join(tmp, "ref.npy")
            np.save(ids_path, ids)
            np.save(mask_path, mask)
            ours, peer, ours_rss, ort_rss = [], [], 0.0, 0.0
            for _ in range(args.rounds):
                proc = subprocess.Popen([args.exe, "--input", ids_path, "--output", out_path,
                                         "--threads", str(threads), "--bench", str(args.iters),
                                         "--autocast", args.autocast],
                                        stdout=subprocess.PIPE, text=True)
                stdout = proc.stdout.read()
                _, status, usage = os.wait4(proc.pid, 0)
                if status != 0:
                    sys.exit(f"{args.exe} failed")
                ours.append(float(re.search(r"median ([0-9.]+) ms", stdout).group(1)))
                ours_rss = max(ours_rss, usage.ru_maxrss / 1024.0)

                result = json.loads(subprocess.run(
                    [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_forward.py"),
                     model, ids_path, mask_path, ref_path, "--threads", str(threads), "--iters", str(args.iters)],
                    capture_output=True, text=True, check=True).stdout)
                peer.append(1e3 * float(np.median(result["seconds"])))
                ort_rss = max(ort_rss, result["peak_rss_mib"])

            diff = float(np.abs(np.load(out_path) - np.load(ref_path)).max())
            rows.append((threads, batch, ours, peer, diff, ours_rss, ort_rss))

print(f"bench/forward: medium Llama (hidden 512, 4 layers, 8/4 heads, MLP 1408, vocab 4096), seq {args.seq}, "
      f"median of {args.iters} per round, {args.rounds} alternating rounds"
      + (f", ours with --autocast {args.autocast}" if args.autocast != "f32" else "")
      + (f", ours compiled with --dtype {args.dtype}" if args.dtype not in ("auto", "f32") else ""))
print("| threads | batch | tpc exe (ms) | onnxruntime (ms) | ratio exe/ort | ratio per round | max|diff| "
      "| peak RSS exe / ort (MiB) |")
print("|---|---|---|---|---|---|---|---|")
for threads, batch, ours, peer, diff, ours_rss, ort_rss in rows:
    mine, theirs = float(np.median(ours)), float(np.median(peer))
    per_round = ", ".join(f"{a / b:.2f}" for a, b in zip(ours, peer))
    print(f"| {threads} | {batch} | {mine:.2f} | {theirs:.2f} | {mine / theirs:.2f} | {per_round} | {diff:.1e} | "
          f"{ours_rss:.0f} / {ort_rss:.0f} |")

# The rate each side runs the projections' multiply-adds at over its whole
# forward, per thread: against bench/gemm's single-core peak it says how
# much room a faster GEMM could still find (a ratio target of 0.9 asks for
# onnxruntime's rate / 0.9).
with open(os.path.join(args.model_dir, "config.json")) as f:
    config = json.load(f)
hidden, mlp = config["hidden_size"], config["intermediate_size"]
head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
attention = head_dim * (2 * config["num_attention_heads"] + 2 * config["num_key_value_heads"])
per_token = config["num_hidden_layers"] * hidden * (attention + 3 * mlp) + hidden * config["vocab_size"]
print()
print("| threads | batch | GFLOP per pass (projections) | tpc exe (GFLOPS per thread) | onnxruntime (GFLOPS per thread) "
      "| needed for 0.9x onnxruntime |")
print("|---|---|---|---|---|---|")
for threads, batch, ours, peer, *_ in rows:
    gflop = 2.0 * per_token * batch * args.seq / 1e9
    mine, theirs = float(np.median(ours)), float(np.median(peer))
    rate = lambda ms: gflop / (ms / 1e3) / threads
    print(f"| {threads} | {batch} | {gflop:.2f} | {rate(mine):.1f} | {rate(theirs):.1f} | {rate(0.9 * theirs):.1f} |")
