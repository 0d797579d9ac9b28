#!/usr/bin/env python3
"""onnxruntime's side of bench/forward, in its own process so that its peak
RSS is its own: runs the model `iters` times on the given inputs (after one
warm-up run) and prints one JSON object with the per-run seconds and the
process's peak RSS (MiB); writes the logits to OUT.

    ort_forward.py MODEL IDS MASK OUT --threads N --iters N"""
import argparse
import json
import resource
import time

import numpy as np
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("ids")
p.add_argument("mask")
p.add_argument("out")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--iters", type=int, default=20)
args = p.parse_args()

opts = ort.SessionOptions()
opts.intra_op_num_threads = args.threads
opts.inter_op_num_threads = 1
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
feeds = {"input_ids": np.load(args.ids), "attention_mask": np.load(args.mask)}
session.run(None, feeds)  # warm-up
times = []
for _ in range(args.iters):
    start = time.perf_counter()
    logits = session.run(None, feeds)[0]
    times.append(time.perf_counter() - start)
np.save(args.out, logits)
print(json.dumps({"seconds": times,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))
