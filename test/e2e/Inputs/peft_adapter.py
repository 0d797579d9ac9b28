#!/usr/bin/env python3
"""A LoRA adapter made by PEFT on an HF model directory: rank 4, alpha 8, on
the given modules, its factors random and non-zero (seed 9); saved with
save_pretrained into OUT, with OUT/logits.npy, PEFT's logits at the
directory's ref/input_ids.npy and ref/attention_mask.npy.

    peft_adapter.py HF_DIR OUT MODULE [MODULE ...]"""
import os
import sys
import warnings

import numpy as np
import torch
import transformers
from peft import LoraConfig, get_peft_model

warnings.filterwarnings("ignore")
hf_dir, out, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
model = transformers.AutoModelForCausalLM.from_pretrained(
    hf_dir, dtype=torch.float32, attn_implementation="eager").eval()
peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                        target_modules=modules))
torch.manual_seed(9)
with torch.no_grad():
    for name, p in peft.named_parameters():
        if "lora_" in name:
            p.uniform_(-0.2, 0.2)
peft.save_pretrained(out)
ref = os.path.join(hf_dir, "ref")
ids = torch.from_numpy(np.load(os.path.join(ref, "input_ids.npy")))
mask = torch.from_numpy(np.load(os.path.join(ref, "attention_mask.npy")))
with torch.no_grad():
    logits = peft(input_ids=ids, attention_mask=mask, use_cache=False).logits
np.save(os.path.join(out, "logits.npy"), logits.numpy())
