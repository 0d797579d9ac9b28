#!/usr/bin/env python3
"""The references of `--autocast bf16` on the CPU: the model of each ARCH,
rebuilt as generate.py exported it, run in PyTorch with every nn.Linear
computed as the runtime's autocast computes the linear forms: input and
weight rounded to bf16 (nearest even), multiplied and accumulated in
float32, the bias added in float32. Writes ARCH/ref/logits_autocast_b3_s12_pad.npy
(and prints how far it is from the float32 logits).

    make_autocast.py [ARCH ...]   (default: llama qwen2)

Needs the model tools (scripts/setup.sh --models)."""
import os
import sys
import types

import numpy as np
import torch

import generate


def bf16_linear(module, x):
    y = x.to(torch.bfloat16).float() @ module.weight.to(torch.bfloat16).float().t()
    return y + module.bias if module.bias is not None else y


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for arch in sys.argv[1:] or ["llama", "qwen2"]:
        out = os.path.join(here, arch)
        hf, ids, mask, ref = generate.rebuild_checked(arch, out)
        for module in hf.modules():
            if isinstance(module, torch.nn.Linear):
                module.forward = types.MethodType(bf16_linear, module)
        with torch.no_grad():
            logits = hf(input_ids=ids, attention_mask=mask, use_cache=False).logits.numpy()
        np.save(os.path.join(out, "ref", "logits_autocast_b3_s12_pad.npy"), logits)
        print(f"{arch}: autocast logits differ from float32 by {np.abs(logits - ref).max():.3e}")


if __name__ == "__main__":
    main()
