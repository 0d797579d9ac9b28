#!/usr/bin/env python3
"""PEFT adapters that exercise every LoRA option tp-opt reads, with PEFT's
own logits as the reference.

For each case below, rebuilds the model generate.py exported (same seed;
checked against the committed reference logits), wraps it with PEFT's
`get_peft_model` and the case's `LoraConfig`, fills every trainable tensor
(lora_A, lora_B, lora_B biases, biases under `bias`, modules_to_save copies)
with random non-zero values (seed 4321), saves the adapter with
`save_pretrained`, reloads it onto a fresh base model with
`PeftModel.from_pretrained`, and writes that model's logits (unmerged) at
the `b3_s12_pad` inputs:

  ARCH/peft/CASE/adapter_config.json, adapter_model.safetensors
  ARCH/peft/CASE/logits_b3_s12_pad.npy

llama_bf16/peft/names_layers_logits_b3_s12_pad.npy (the names_layers
adapter, float32, on the Llama's bf16 checkpoint: PEFT in float32 on its
rounded weights), and peft_matching.json: for configurations of target_modules,
exclude_modules, layers_to_transform / layers_pattern, modules_to_save,
rank_pattern and alpha_pattern, PEFT's own answer (check_target_module_exists,
get_pattern_key) for each of a list of module names: whether it is adapted,
with which rank and alpha (tp-unittests compares LoRAConfig with it).

Needs the model tools (scripts/setup.sh --models).
"""

import argparse
import json
import os
import shutil
import sys
import warnings

import numpy as np
import torch
from peft import LoraConfig, PeftModel, get_peft_model

import generate

warnings.filterwarnings("ignore")

# name -> (architecture, LoraConfig arguments). Ranks divide by 2 so that
# every case also runs at tp=2.
CASES = {
    # rsLoRA scaling (alpha / sqrt(r)) with per-module ranks and alphas,
    # all-linear minus an excluded module, and options that do not change
    # a loaded adapter (fan_in_fan_out on nn.Linear, gaussian init).
    "rslora_patterns": ("llama", dict(
        r=8, lora_alpha=16, use_rslora=True, target_modules="all-linear",
        exclude_modules=["k_proj"],
        rank_pattern={"o_proj": 4, "model.layers.1.mlp.up_proj": 2},
        alpha_pattern={"v_proj": 32},
        fan_in_fan_out=True, init_lora_weights="gaussian")),
    # Full module names and suffixes, with layers_to_transform: a full name
    # is taken as it is, a suffix only in the listed layers (PEFT's rule).
    "names_layers": ("llama", dict(
        r=4, lora_alpha=8,
        target_modules=["model.layers.0.self_attn.q_proj", "v_proj",
                        "down_proj"],
        layers_to_transform=[1], layers_pattern="layers")),
    # A regular expression for the targets and one for the exclusions;
    # lm_head and the final norm replaced by trained copies.
    "regex_modules_to_save": ("llama", dict(
        r=4, lora_alpha=4,
        target_modules=r".*\.(q_proj|v_proj|gate_proj|down_proj)",
        exclude_modules=r"model\.layers\.0\.mlp\.gate_proj",
        modules_to_save=["lm_head", "norm"])),
    # A bias on lora_B (scaled with the branch), and every bias trained.
    "lora_bias_all": ("qwen2", dict(
        r=4, lora_alpha=8, lora_bias=True, bias="all",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"])),
    # Only the biases of adapted modules trained.
    "bias_lora_only": ("qwen2", dict(
        r=4, lora_alpha=8, bias="lora_only",
        target_modules=["q_proj", "v_proj", "down_proj"])),
}


def make_case(name, arch, kwargs, root):
    hf, ids, mask, ref = generate.rebuild_checked(arch, os.path.join(root, arch))

    model = get_peft_model(hf, LoraConfig(**kwargs))
    g = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1 +
                        (p if "modules_to_save" in pname else 0))
    out = os.path.join(root, arch, "peft", name)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    os.remove(os.path.join(out, "README.md"))

    # The reference: the saved adapter as PEFT loads it onto a fresh model.
    _, fresh = generate.build(arch)
    loaded = PeftModel.from_pretrained(fresh, out).eval()
    with torch.no_grad():
        logits = loaded(input_ids=ids, attention_mask=mask,
                        use_cache=False).logits.numpy()
        trained = model(input_ids=ids, attention_mask=mask,
                        use_cache=False).logits.numpy()
    if np.abs(logits - trained).max() > 1e-5:
        sys.exit(f"{name}: the reloaded adapter gives other logits")
    np.save(os.path.join(out, "logits_b3_s12_pad.npy"), logits)
    adapted = sum(1 for n, _ in loaded.named_modules() if n.endswith("lora_A"))
    print(f"  {name} ({arch}): {adapted} adapted linears, max |logits - base| "
          f"{np.abs(logits - ref).max():.3g}")


# Module names of the five architectures' layouts, and nested ones
# (MoE-style "layers.1.experts.0") where PEFT's layer index rule matters.
MATCH_KEYS = [
    "model.embed_tokens", "lm_head", "model.norm",
    "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
    "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj",
    "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.o_proj",
    "model.layers.0.mlp.gate_proj", "model.layers.1.mlp.up_proj",
    "model.layers.1.mlp.down_proj", "model.layers.12.mlp.down_proj",
    "model.layers.1.input_layernorm", "model.layers.0.self_attn.q_norm",
    "backbone.layers.2.mixer.up_proj", "backbone.layers.2.mixer.in_proj",
    "model.language_model.layers.1.self_attn.q_proj",
    "model.layers.1.experts.0.up_proj", "model.h.3.attn.c_attn",
    "model.layers.0.self_attn.xo_proj",
]

MATCH_CONFIGS = [
    dict(target_modules=["q_proj", "v_proj"]),
    dict(target_modules=["model.layers.0.self_attn.q_proj", "o_proj"],
         layers_to_transform=[1]),
    dict(target_modules=["up_proj", "q_proj"], layers_to_transform=1),
    dict(target_modules=["up_proj", "q_proj", "c_attn"],
         layers_to_transform=[0, 2, 3], layers_pattern=["layers", "h"]),
    dict(target_modules=["up_proj"], layers_to_transform=[0],
         layers_pattern="experts"),
    dict(target_modules=r".*\.(q|o)_proj", exclude_modules=r".*layers\.1\..*"),
    dict(target_modules=r"model\.layers\.\d+\.mlp\..*?_proj"),
    dict(target_modules=["q_proj", "o_proj", "up_proj", "down_proj"],
         exclude_modules=["model.layers.1.self_attn.o_proj", "down_proj"]),
    dict(target_modules=["q_proj", "up_proj", "q_norm"],
         modules_to_save=["mlp", "norm"]),
    dict(target_modules=["q_proj", "o_proj", "up_proj", "down_proj"],
         rank_pattern={"o_proj": 2, r"model\.layers\.1\.mlp\.[a-z]+_proj": 6},
         alpha_pattern={"layers.0.self_attn.q_proj": 3, "down_proj": 32}),
]


def write_matching_table(root):
    from peft.tuners.tuners_utils import check_target_module_exists
    from peft.utils.other import get_pattern_key
    table = []
    for kwargs in MATCH_CONFIGS:
        config = LoraConfig(r=4, lora_alpha=8, **kwargs)
        answers = {}
        for key in MATCH_KEYS:
            found = check_target_module_exists(config, key)
            adapted = bool(found) and type(found).__name__ != "_ExcludedModule"
            r = config.rank_pattern.get(
                get_pattern_key(config.rank_pattern.keys(), key), config.r)
            alpha = config.alpha_pattern.get(
                get_pattern_key(config.alpha_pattern.keys(), key),
                config.lora_alpha)
            answers[key] = [r, alpha] if adapted else None
        table.append({"config": {k: v for k, v in config.to_dict().items()
                                 if k in kwargs or k in ("r", "lora_alpha")},
                      "modules": answers})
    with open(os.path.join(root, "peft_matching.json"), "w") as f:
        json.dump(table, f, indent=1, default=sorted)
        f.write("\n")
    print(f"  peft_matching.json: {len(table)} configurations x "
          f"{len(MATCH_KEYS)} modules")


def write_bf16_base_reference(root):
    """PEFT's logits for the names_layers adapter (float32) on the Llama's
    bf16 checkpoint (make_variants.py's llama_bf16) computed in float32:
    what tp-opt, which reads each tensor in its own type, must give."""
    config, hf = generate.build("llama")
    rounded = {k: v.to(torch.bfloat16).float()
               for k, v in hf.state_dict().items()}
    base = type(hf)._from_config(config, dtype=torch.float32)
    base.load_state_dict(rounded, strict=False)
    model = PeftModel.from_pretrained(
        base.eval(), os.path.join(root, "llama", "peft", "names_layers")).eval()
    ids, mask = generate.inputs_for(generate.REF_SHAPES["b3_s12_pad"], True, 11)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask,
                       use_cache=False).logits.float().numpy()
    out = os.path.join(root, "llama_bf16", "peft")
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "names_layers_logits_b3_s12_pad.npy"), logits)
    print("  llama_bf16/peft: names_layers on the bf16 checkpoint")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--case", nargs="*", default=list(CASES))
    args = parser.parse_args()
    for name in args.case:
        arch, kwargs = CASES[name]
        make_case(name, arch, kwargs, args.out)
    write_matching_table(args.out)
    write_bf16_base_reference(args.out)


if __name__ == "__main__":
    sys.exit(main())
