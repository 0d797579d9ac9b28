#!/usr/bin/env python3
"""bench/forward: the tpc-compiled executable against onnxruntime (CPU
execution provider, graph optimizations on, the same intra-op thread count)
on the same ONNX model, in one run. Prints a table of median forward times
and their ratio (ours / onnxruntime; <= 1.0 means no slower).

    run.py MODEL_DIR EXE [--iters N] [--threads 1 2] [--batches 1 4] [--seq 128]

MODEL_DIR holds model.onnx (bench/forward/make_model.py); EXE is
`tpc MODEL_DIR/model.onnx -o DIR`'s DIR/model."""
import argparse
import os
import re
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument("model_dir")
p.add_argument("exe")
p.add_argument("--iters", type=int, default=20)
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

            # Ours first, in its own process, while no onnxruntime session
            # exists (its thread pool spins after each run).
            ids_path = os.path.join(tmp, "ids.npy")
            out_path = os.path.join(tmp, "out.npy")
            np.save(ids_path, ids)
            run = subprocess.run([args.exe, "--input", ids_path, "--output", out_path,
                                  "--threads", str(threads), "--bench", str(args.iters)],
                                 capture_output=True, text=True, check=True)
            ours_ms = float(re.search(r"median ([0-9.]+) ms", run.stdout).group(1))

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            feeds = {"input_ids": ids, "attention_mask": mask}
            session.run(None, feeds)  # warm-up
            times = []
            for _ in range(args.iters):
                start = time.perf_counter()
                ref = session.run(None, feeds)[0]
                times.append(time.perf_counter() - start)
            ort_ms = 1e3 * float(np.median(times))
            del session

            diff = float(np.abs(np.load(out_path) - ref).max())
            rows.append((threads, batch, ours_ms, ort_ms, diff))

print(f"bench/forward: medium Llama (hidden 512, 4 layers, 8/4 heads, MLP 1408, vocab 4096), seq {args.seq}, "
      f"median of {args.iters}")
print("| threads | batch | tpc exe (ms) | onnxruntime (ms) | ratio exe/ort | max|diff| |")
print("|---|---|---|---|---|---|")
for threads, batch, ours, ref, diff in rows:
    print(f"| {threads} | {batch} | {ours:.2f} | {ref:.2f} | {ours / ref:.2f} | {diff:.1e} |")
