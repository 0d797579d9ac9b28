#!/usr/bin/env python3
"""The references of `tpc --dtype bf16|f16` on float32 checkpoints: the model
of each ARCH, rebuilt as generate.py exported it, converted with
`model.to(dtype)` (what a user who wants another compute type does in
PyTorch) and run eagerly in that type. Writes
ARCH/ref/logits_DTYPE_b3_s12_pad.npy (as float32, exactly) and prints how
far it is from the float32 logits.

    make_dtype.py [ARCH:DTYPE ...]   (default: llama:bf16 qwen2:bf16 llama:f16)

Needs the model tools (scripts/setup.sh --models)."""
import os
import sys

import numpy as np
import torch

import generate

TYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for spec in sys.argv[1:] or ["llama:bf16", "qwen2:bf16", "llama:f16"]:
        arch, dtype = spec.split(":")
        out = os.path.join(here, arch)
        hf, ids, mask, ref = generate.rebuild_checked(arch, out)
        hf = hf.to(TYPES[dtype])
        with torch.no_grad():
            logits = hf(input_ids=ids, attention_mask=mask, use_cache=False).logits.float().numpy()
        np.save(os.path.join(out, "ref", f"logits_{dtype}_b3_s12_pad.npy"), logits)
        print(f"{arch}: {dtype} logits differ from float32 by {np.abs(logits - ref).max():.3e}")


if __name__ == "__main__":
    main()
