#!/usr/bin/env python3
"""Writes an independent reference for a model at a chosen shape: random
token ids (and, with --pad, a mask with left padding in row 0 and right
padding in the last row), and the logits onnxruntime (CPU) computes.

    ort_reference.py MODEL.onnx OUTDIR --batch B --seq S [--pad] [--seed N]

Writes OUTDIR/input_ids.npy, OUTDIR/attention_mask.npy, OUTDIR/logits.npy."""
import argparse
import os

import numpy as np
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("out")
p.add_argument("--batch", type=int, required=True)
p.add_argument("--seq", type=int, required=True)
p.add_argument("--pad", action="store_true")
p.add_argument("--right-pad", action="store_true",
               help="pad only at the end of rows (what GroupQueryAttention supports)")
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()

opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
session = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
vocab = session.get_outputs()[0].shape[-1]
rng = np.random.default_rng(args.seed)
ids = rng.integers(0, vocab, size=(args.batch, args.seq), dtype=np.int64)
mask = np.ones_like(ids)
if args.pad:
    mask[0, :3] = 0
    mask[-1, -2:] = 0
if args.right_pad:
    mask[0, -3:] = 0
    mask[-1, -2:] = 0
feeds = {"input_ids": ids}
for i in session.get_inputs():
    if i.name == "attention_mask":
        feeds[i.name] = mask
    elif i.name.startswith("past_key_values."):
        # An empty KV cache: [batch, kv_heads, 0, head_dim].
        feeds[i.name] = np.zeros((args.batch, i.shape[1], 0, i.shape[3]), np.float32)
logits = session.run(None, feeds)[0].astype(np.float32)
os.makedirs(args.out, exist_ok=True)
np.save(os.path.join(args.out, "input_ids.npy"), ids)
np.save(os.path.join(args.out, "attention_mask.npy"), mask)
np.save(os.path.join(args.out, "logits.npy"), logits)
