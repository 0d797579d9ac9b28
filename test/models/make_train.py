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
  ARCH/train/final_logits_b3_s12_pad.npy
                                      the trained model's logits at
                                      ref/input_ids_b3_s12_pad.npy

and, for Llama and Qwen2 with the LoRA adapter ARCH/lora loaded by PEFT
(`PeftModel.from_pretrained(..., is_trainable=True)`: only lora_A and
lora_B train), the same run on the same data in ARCH/train_lora/ (the
adapter's factors under their module FQNs, `q_proj.lora_A.weight`, beside
the unchanged base weights), and for Llama the same run with
`clip_grad_norm_(params, 1.0)` before each update in llama/train_clip/.

    .venv/bin/python test/models/make_train.py [--out test/models] [--arch A ...] [--dtype bf16]

With --dtype bf16 (default arch: llama) only the plain run, with the model
converted by model.to(torch.bfloat16), into ARCH/train_bf16/. With
--master-weights as well, the run FSDP2 makes of float32 parameters under
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), into
ARCH/train_bf16_master/: each step computes forward and backward on a bf16
copy of the float32 parameters (rounded once per step), adds each
micro-batch's bf16 gradients into float32 ones, and AdamW updates the
float32 parameters; the saved weights are their bf16 rounding, what the
program holds. With --seq L
(default arch: llama) only the plain run, on sequences of length L, into
ARCH/train_sL/ (L = 11: sequence parallelism pads to a multiple of tp).
The uneven models (--arch llama_uneven, ..., make_variants.py's) train on
ids over their whole vocabulary (321), so that every rank's range of an
uneven split has labels; llama_uneven also with its LoRA adapter.

Needs the model tools (scripts/setup.sh --models).
"""

import argparse
import copy
import json
import os
import warnings

import numpy as np
import torch
from safetensors.torch import save_file

import generate

warnings.filterwarnings("ignore")

ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "nemotron_h"]
# Checkpoints stored in bf16 (generate.VARIANT_DTYPES), which tpc --train
# trains in f32: the reference is the float32 model on the rounded weights;
# Llama 3 RoPE scaling over 16 original positions, and Gemma3 with
# final_logit_softcapping, and a Llama decoder with fused projections
# (Phi-3). Only with --arch.
REDUCED = ["llama_bf16", "llama_rope_llama3_short", "gemma3_softcap",
           "phi3_fused"]
# Shapes that do not divide by tp 3-6 (tpc --allow-uneven), trained on ids
# over their whole vocabulary, so that every rank's range has labels. Only
# with --arch.
UNEVEN = sorted(generate.WHOLE_VOCAB_IDS)
# Gemma 3 1B's one KV head (its k_norm over the whole projection), and
# NemotronH with B and C as wide as x. Only with --arch.
GROUPED = ["gemma3_kv1", "nemotron_h_groups"]
# A tied embedding on a square table (vocabulary = hidden size). Only with
# --arch.
TIED = ["llama_tied_square"]
LORA_ARCHS = ["llama", "qwen2", "llama_uneven"]
STEPS, ACCUM, BATCH, SEQ = 3, 2, 2, 12
TYPES = {"bf16": torch.bfloat16}
TYPE_NAMES = {v: k for k, v in TYPES.items()}


def data(seq=SEQ, vocab=generate.VOCAB):
    g = torch.Generator().manual_seed(2024)
    rows = STEPS * ACCUM * BATCH
    ids = torch.randint(0, vocab, (rows, seq), generator=g)
    mask = torch.ones(rows, seq, dtype=torch.long)
    mask[1::BATCH, -3:] = 0
    return ids, mask


def peft_name(name):
    """PEFT's parameter name as tp-opt (and transformers) name the module's."""
    return (name.removeprefix("base_model.model.").replace(".default", "")
            .replace(".base_layer", ""))


def rebuild(arch, out):
    """The model of `arch` as its exports hold it; a bf16 / f16 checkpoint
    as the float32 model on its rounded weights (checked against its
    ref/logits_upcast_b3_s12_pad.npy)."""
    dtype = generate.VARIANT_DTYPES.get(arch)
    if dtype is None:
        return generate.rebuild_checked(arch, os.path.join(out, arch))[0]
    config, hf = generate.build(arch)
    upcast = type(hf)._from_config(config, dtype=torch.float32)
    upcast.load_state_dict({k: v.to(dtype).float()
                            for k, v in hf.state_dict().items()}, strict=False)
    ids, mask = generate.inputs_for(generate.REF_SHAPES["b3_s12_pad"], True, 11)
    ref = np.load(os.path.join(out, arch, "ref",
                               "logits_upcast_b3_s12_pad.npy"))
    with torch.no_grad():
        got = upcast(input_ids=ids, attention_mask=mask, use_cache=False).logits
    drift = np.abs(got.numpy() - ref).max()
    if drift > 1e-5:
        raise SystemExit(f"{arch}: rebuilt model differs from the exported "
                         f"one ({drift:.3g}); rerun make_variants.py first")
    return upcast


def write_run(d, ids, mask, steps, extra):
    """A run's data and reference.json (the optimizer's settings, `extra`,
    the per-step losses and grad norms) into `d`."""
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "tokens.npy"), ids.numpy())
    np.save(os.path.join(d, "mask.npy"), mask.numpy())
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump({"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.01,
                   "micro_batch": BATCH, "grad_accum": ACCUM, **extra,
                   "steps": steps}, f, indent=1)
        f.write("\n")


def train(arch, out, lora=False, max_grad_norm=None, dtype=None, seq=SEQ,
          master=False):
    hf = rebuild(arch, out)
    if master:
        return train_master(arch, out, hf, TYPES[dtype])
    if dtype is not None:
        # Trained in that type as a user of PyTorch does: model.to(dtype),
        # AdamW on the bf16 parameters (its moments in their type).
        hf = hf.to(TYPES[dtype])
    model = hf
    if lora:
        from peft import PeftModel
        model = PeftModel.from_pretrained(
            hf, os.path.join(out, arch, "lora"), is_trainable=True)
    model.train()
    vocab = (hf.config.vocab_size if arch in generate.WHOLE_VOCAB_IDS
             else generate.VOCAB)
    ids, mask = data(seq, vocab)
    labels = ids.masked_fill(mask == 0, -100)
    params = [p for p in model.parameters() if p.requires_grad]
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
            out_k = model(input_ids=ids[r], attention_mask=mask[r],
                       labels=labels[r], num_items_in_batch=tokens,
                       use_cache=False)
            out_k.loss.backward()
            loss += out_k.loss.item()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum()
                              for p in params if p.grad is not None))
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        opt.step()
        steps.append({"step": step + 1, "loss": loss,
                      "grad_norm": float(norm), "label_tokens": tokens})
    d = os.path.join(out, arch, "train_lora" if lora
                     else "train_clip" if max_grad_norm
                     else f"train_{dtype}" if dtype
                     else f"train_s{seq}" if seq != SEQ else "train")
    os.makedirs(d, exist_ok=True)
    write_run(d, ids, mask, steps, {} if max_grad_norm is None
              else {"max_grad_norm": max_grad_norm})
    # The trained model's logits at generate.py's padded reference inputs
    # (a checkpoint reloaded at any tp must give them).
    model.eval()
    ids_ref, mask_ref = generate.inputs_for(generate.REF_SHAPES["b3_s12_pad"],
                                            True, 11, vocab)
    with torch.no_grad():
        logits = model(input_ids=ids_ref, attention_mask=mask_ref,
                       use_cache=False).logits
    np.save(os.path.join(d, "final_logits_b3_s12_pad.npy"),
            logits.float().numpy())
    # float32 (exactly, for bf16 weights): what numpy reads.
    save_file({peft_name(n): p.detach().float().contiguous()
               for n, p in model.named_parameters()},
              os.path.join(d, "final.safetensors"))
    print(arch, "lora" if lora else "", [round(s["loss"], 6) for s in steps])


def train_master(arch, out, hf, dtype):
    """The bf16 run with float32 master weights (see the module doc)."""
    work = copy.deepcopy(hf).to(dtype)
    hf.train()
    work.train()
    ids, mask = data()
    labels = ids.masked_fill(mask == 0, -100)
    pairs = list(zip(hf.parameters(), work.parameters()))
    params = [m for m, _ in pairs]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01,
                            betas=(0.9, 0.999), eps=1e-8)

    def round_into_work():
        with torch.no_grad():
            for m, w in pairs:
                w.copy_(m)

    steps = []
    for step in range(STEPS):
        opt.zero_grad()
        round_into_work()
        rows = slice(step * ACCUM * BATCH, (step + 1) * ACCUM * BATCH)
        tokens = int((labels[rows, 1:] != -100).sum())
        loss = 0.0
        for k in range(ACCUM):
            r = slice(rows.start + k * BATCH, rows.start + (k + 1) * BATCH)
            out_k = work(input_ids=ids[r], attention_mask=mask[r],
                         labels=labels[r], num_items_in_batch=tokens,
                         use_cache=False)
            out_k.loss.backward()
            loss += out_k.loss.item()
            # Each micro-batch's bf16 gradient into the float32 one.
            for m, w in pairs:
                g = w.grad.float()
                m.grad = g if m.grad is None else m.grad + g
                w.grad = None
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params))
        opt.step()
        steps.append({"step": step + 1, "loss": loss,
                      "grad_norm": float(norm), "label_tokens": tokens})
    round_into_work()
    d = os.path.join(out, arch, f"train_{TYPE_NAMES[dtype]}_master")
    os.makedirs(d, exist_ok=True)
    write_run(d, ids, mask, steps, {"master_weights": "f32"})
    save_file({n: p.detach().float().contiguous()
               for n, p in work.named_parameters()},
              os.path.join(d, "final.safetensors"))
    print(arch, "bf16 + f32 master", [round(s["loss"], 6) for s in steps])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(__file__))
    parser.add_argument("--arch", action="append",
                        choices=ARCHS + REDUCED + UNEVEN + GROUPED + TIED)
    parser.add_argument("--dtype", choices=list(TYPES),
                        help="only the plain run, trained in this type "
                             "(ARCH/train_DTYPE)")
    parser.add_argument("--master-weights", action="store_true",
                        help="with --dtype: float32 master weights "
                             "(ARCH/train_DTYPE_master)")
    parser.add_argument("--seq", type=int, default=SEQ,
                        help="only the plain run, on sequences of this "
                             "length (ARCH/train_sSEQ)")
    args = parser.parse_args()
    if args.seq != SEQ:
        for arch in args.arch or ["llama"]:
            train(arch, args.out, seq=args.seq)
        return
    if args.master_weights and not args.dtype:
        parser.error("--master-weights needs --dtype")
    if args.dtype:
        for arch in args.arch or ["llama"]:
            train(arch, args.out, dtype=args.dtype,
                  master=args.master_weights)
        return
    for arch in args.arch or ARCHS:
        train(arch, args.out)
        if arch in LORA_ARCHS:
            train(arch, args.out, lora=True)
        if arch == "llama":
            train(arch, args.out, max_grad_norm=1.0)


if __name__ == "__main__":
    main()
