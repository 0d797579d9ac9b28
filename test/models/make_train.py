#!/usr/bin/env python3
"""PyTorch training runs that `model --train` is checked against.

For each architecture below, rebuilds the model generate.py exported (same
seed; checked against the committed reference logits) and trains it as a
user of transformers would: AdamW (lr 1e-3, weight decay 0.01, betas 0.9 /
0.999, eps 1e-8), 3 optimizer steps of K=2 micro-batches of 2 sequences of
length 12, the second sequence of each micro-batch right-padded by 3. The
loss of a micro-batch is transformers' own,
`model(input_ids, attention_mask=mask, labels=ids with -100 where the mask
is 0, num_items_in_batch=N)`, with N the label tokens of the whole step (as
AutoModel normalizes by num_label_tokens); the step's loss is their sum.
The gradient norm is taken after accumulation, before the update.

  ARCH/train/tokens.npy, mask.npy     int64 [12, 12] (micro-batches in order)
  ARCH/train/reference.json           per-step loss and grad norm
  ARCH/train/final.safetensors        every parameter after the 3 steps

    .venv/bin/python test/models/make_train.py [--out test/models] [--arch A ...]

Needs the model tools (scripts/setup.sh --models).
"""

import argparse
import json
import os
import warnings

import numpy as np
import torch
from safetensors.torch import save_file

import generate

warnings.filterwarnings("ignore")

ARCHS = ["llama", "qwen2", "qwen3", "gemma3"]
STEPS, ACCUM, BATCH, SEQ = 3, 2, 2, 12


def data():
    g = torch.Generator().manual_seed(2024)
    rows = STEPS * ACCUM * BATCH
    ids = torch.randint(0, generate.VOCAB, (rows, SEQ), generator=g)
    mask = torch.ones(rows, SEQ, dtype=torch.long)
    mask[1::BATCH, -3:] = 0
    return ids, mask


def train(arch, out):
    hf, _, _, _ = generate.rebuild_checked(arch, os.path.join(out, arch))
    hf.train()
    ids, mask = data()
    labels = ids.masked_fill(mask == 0, -100)
    params = [p for p in hf.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01,
                            betas=(0.9, 0.999), eps=1e-8)
    steps = []
    for step in range(STEPS):
        opt.zero_grad()
        rows = slice(step * ACCUM * BATCH, (step + 1) * ACCUM * BATCH)
        tokens = int((labels[rows, 1:] != -100).sum())
        loss = 0.0
        for k in range(ACCUM):
            r = slice(rows.start + k * BATCH, rows.start + (k + 1) * BATCH)
            out_k = hf(input_ids=ids[r], attention_mask=mask[r],
                       labels=labels[r], num_items_in_batch=tokens,
                       use_cache=False)
            out_k.loss.backward()
            loss += out_k.loss.item()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum()
                              for p in params if p.grad is not None))
        opt.step()
        steps.append({"step": step + 1, "loss": loss,
                      "grad_norm": float(norm), "label_tokens": tokens})
    d = os.path.join(out, arch, "train")
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "tokens.npy"), ids.numpy())
    np.save(os.path.join(d, "mask.npy"), mask.numpy())
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump({"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.01,
                   "micro_batch": BATCH, "grad_accum": ACCUM,
                   "steps": steps}, f, indent=1)
        f.write("\n")
    save_file({n: p.detach().contiguous()
               for n, p in hf.named_parameters()},
              os.path.join(d, "final.safetensors"))
    print(arch, [round(s["loss"], 6) for s in steps])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(__file__))
    parser.add_argument("--arch", action="append", choices=ARCHS)
    args = parser.parse_args()
    for arch in args.arch or ARCHS:
        train(arch, args.out)


if __name__ == "__main__":
    main()
