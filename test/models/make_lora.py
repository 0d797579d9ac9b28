#!/usr/bin/env python3
"""LoRA adapters for the generated models, with PyTorch reference logits.

For each architecture given, rebuilds the model generate.py exported (same
seed; checked against the committed reference logits), attaches a rank-8
LoRA (alpha 16, so scale 2) with random, non-zero lora_A and lora_B to every
linear of the decoder layers (PEFT's "all-linear": lm_head excluded), and
writes ARCH/lora/:
  adapter_model.safetensors  PEFT's layout: base_model.model.<module>.lora_A.weight
                             [r, in] and ...lora_B.weight [out, r], float32
  adapter_config.json        r, lora_alpha, target_modules
  logits_b3_s12_pad.npy      PyTorch's logits with the adapter, computed as
                             base(x) + lora_B(lora_A(x) * scale) (not merged)

Needs the model tools (scripts/setup.sh --models).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

import generate

RANK, ALPHA = 8, 16


def make_lora(arch, out):
    hf, ids, mask, ref = generate.rebuild_checked(arch, out)

    g = torch.Generator().manual_seed(4321)
    tensors, targets = {}, set()
    scale = ALPHA / RANK
    for name, module in hf.named_modules():
        if not isinstance(module, torch.nn.Linear) or ".layers." not in name:
            continue
        a = torch.randn(RANK, module.in_features, generator=g) * 0.1
        b = torch.randn(module.out_features, RANK, generator=g) * 0.1
        tensors[f"base_model.model.{name}.lora_A.weight"] = a.contiguous()
        tensors[f"base_model.model.{name}.lora_B.weight"] = b.contiguous()
        targets.add(name.rsplit(".", 1)[1])
        module.register_forward_hook(
            lambda m, args, y, a=a, b=b: y + ((args[0] @ a.T) * scale) @ b.T)
    with torch.no_grad():
        logits = hf(input_ids=ids, attention_mask=mask, use_cache=False).logits

    lora_dir = os.path.join(out, "lora")
    os.makedirs(lora_dir, exist_ok=True)
    save_file(tensors, os.path.join(lora_dir, "adapter_model.safetensors"))
    with open(os.path.join(lora_dir, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": RANK, "lora_alpha": ALPHA,
                   "target_modules": sorted(targets)}, f, indent=1)
        f.write("\n")
    np.save(os.path.join(lora_dir, "logits_b3_s12_pad.npy"), logits.numpy())
    print(f"  {arch}: {len(tensors) // 2} adapted linears, max |logits - "
          f"base| {np.abs(logits.numpy() - ref).max():.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--arch", nargs="*", default=["llama", "qwen2"])
    args = parser.parse_args()
    for arch in args.arch:
        make_lora(arch, os.path.join(args.out, arch))


if __name__ == "__main__":
    sys.exit(main())
