#!/usr/bin/env python3
"""An HF model directory as users get one: transformers builds ARCH from a
config of its own sizes with random weights (seed 7) and save_pretrained
writes it sharded (model-0000k-of-0000n.safetensors and the index); the
directory also gets PyTorch's logits for padded reference inputs.

    hf_checkpoint.py ARCH OUT [--dtype float32|bfloat16] [--tied]

OUT/ref/{input_ids,attention_mask,logits}.npy: a [2, 9] batch, row 1 left
padded by 2; with bfloat16 also logits_upcast.npy, PyTorch in float32 on
the rounded weights."""
import argparse
import os

import numpy as np
import torch
import transformers

p = argparse.ArgumentParser()
p.add_argument("arch", choices=["llama", "qwen2", "qwen3", "gemma3",
                                "nemotron_h"])
p.add_argument("out")
p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
p.add_argument("--tied", action="store_true")
args = p.parse_args()

# Sizes none of the test models have: 3 layers, hidden 96, 6 heads of 16,
# 2 KV heads, MLP 160, vocab 200.
common = dict(vocab_size=200, hidden_size=96, intermediate_size=160,
              num_hidden_layers=3, num_attention_heads=6,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
              tie_word_embeddings=args.tied)
config = {
    "llama": lambda: transformers.LlamaConfig(**common, rope_theta=50000.0),
    "qwen2": lambda: transformers.Qwen2Config(**common),
    "qwen3": lambda: transformers.Qwen3Config(**common),
    "gemma3": lambda: transformers.Gemma3TextConfig(
        **common, sliding_window=4, query_pre_attn_scalar=16,
        layer_types=["sliding_attention", "sliding_attention",
                     "full_attention"]),
    # Mamba, attention and MLP layers; transformers saves its parameters
    # under backbone., as NVIDIA's checkpoints name them.
    "nemotron_h": lambda: transformers.NemotronHConfig(
        vocab_size=200, hidden_size=96, intermediate_size=160,
        layers_block_type=["mamba", "attention", "mlp"],
        num_attention_heads=6, num_key_value_heads=2, head_dim=16,
        mamba_num_heads=6, mamba_head_dim=16, n_groups=2, ssm_state_size=8,
        conv_kernel=4, chunk_size=8, use_mamba_kernels=False,
        max_position_embeddings=64, tie_word_embeddings=args.tied),
}[args.arch]()
config._attn_implementation = "eager"
torch.manual_seed(7)
model = transformers.AutoModelForCausalLM.from_config(config).eval()
with torch.no_grad():
    for name, param in model.named_parameters():
        if param.dim() == 1:
            param.copy_(torch.empty_like(param).uniform_(0.5, 1.5))
upcast = None
if args.dtype != "float32":
    # As from_pretrained(dtype=...) builds it (the rotary frequencies stay
    # float32), with the weights rounded; and the float32 model on the
    # rounded weights.
    dtype = getattr(torch, args.dtype)
    rounded = {k: v.to(dtype) for k, v in model.state_dict().items()}
    model = type(model)._from_config(config, dtype=dtype).eval()
    model.load_state_dict(rounded, strict=False)
    upcast = type(model)._from_config(config, dtype=torch.float32).eval()
    upcast.load_state_dict({k: v.float() for k, v in rounded.items()},
                           strict=False)
model.save_pretrained(args.out, max_shard_size="60KB")

g = torch.Generator().manual_seed(3)
ids = torch.randint(0, 200, (2, 9), generator=g)
mask = torch.ones_like(ids)
mask[1, :2] = 0
with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
ref = os.path.join(args.out, "ref")
os.makedirs(ref, exist_ok=True)
np.save(os.path.join(ref, "input_ids.npy"), ids.numpy())
np.save(os.path.join(ref, "attention_mask.npy"), mask.numpy())
np.save(os.path.join(ref, "logits.npy"), logits.float().numpy())
if upcast is not None:
    with torch.no_grad():
        logits = upcast(input_ids=ids, attention_mask=mask,
                        use_cache=False).logits
    np.save(os.path.join(ref, "logits_upcast.npy"), logits.numpy())
shards = [f for f in os.listdir(args.out) if f.endswith(".safetensors")]
print(f"{len(shards)} shards")
