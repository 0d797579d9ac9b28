#!/usr/bin/env python3
"""Loads a checkpoint that `model --train --save DIR` wrote the way a user
would, `AutoModelForCausalLM.from_pretrained(DIR)` (and, when DIR holds
adapter_model.safetensors, `PeftModel.from_pretrained` on top), and compares
its logits at the reference inputs with the expected ones:

    load_in_transformers.py DIR --ids IDS.npy --mask MASK.npy --logits REF.npy

Prints "ok: ..." or "FAIL: ..."; without torch / transformers in the venv
(they are only in scripts/setup.sh --models) it prints a "skipped: ..."
line and succeeds."""
import argparse
import os
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--ids", required=True)
p.add_argument("--mask", required=True)
p.add_argument("--logits", required=True)
p.add_argument("--rtol", type=float, default=1e-4)
args = p.parse_args()
try:
    import torch
    import transformers
except ImportError:
    print("skipped: torch and transformers are not installed in this venv "
          "(scripts/setup.sh --models installs them)")
    sys.exit(0)

model = transformers.AutoModelForCausalLM.from_pretrained(args.dir)
# transformers loads an adapter_config.json beside the weights itself (its
# PEFT integration); otherwise PEFT does.
if (os.path.exists(os.path.join(args.dir, "adapter_model.safetensors"))
        and not hasattr(model, "peft_config")):
    try:
        from peft import PeftModel
    except ImportError:
        print("skipped: peft is not installed in this venv")
        sys.exit(0)
    model = PeftModel.from_pretrained(model, args.dir)
model.eval()
ids = torch.from_numpy(np.load(args.ids))
mask = torch.from_numpy(np.load(args.mask))
with torch.no_grad():
    got = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
ref = np.load(args.logits)
keep = np.load(args.mask).astype(bool)
diff = float(np.abs(got.numpy() - ref)[keep].max())
bound = args.rtol * max(1.0, float(np.abs(ref[keep]).max()))
ok = diff <= bound
print(f"{'ok' if ok else 'FAIL'}: transformers' from_pretrained logits, "
      f"max|diff| {diff:.3e} <= {bound:.3e}")
sys.exit(0 if ok else 1)
