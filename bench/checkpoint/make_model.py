#!/usr/bin/env python3
"""A Qwen2.5-0.5B-shaped model as users have one: transformers'
Qwen2ForCausalLM (hidden 896, 24 layers, 14 heads of 64, 2 KV heads, MLP
4864, vocab 151936, tied embeddings; 494 M parameters) with random weights
(seed 0), saved by save_pretrained in shards of 500 MB, float32; and
tokens.npy (8 sequences of 32 tokens) for the training step.

    make_model.py OUT"""
import os
import sys

import numpy as np
import torch
import transformers

out = sys.argv[1]
config = transformers.Qwen2Config(
    vocab_size=151936, hidden_size=896, intermediate_size=4864,
    num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
    head_dim=64, max_position_embeddings=32768, rope_theta=1000000.0,
    rms_norm_eps=1e-6, tie_word_embeddings=True)
torch.manual_seed(0)
model = transformers.Qwen2ForCausalLM(config).eval()
model.save_pretrained(out, max_shard_size="500MB")
rng = np.random.default_rng(0)
np.save(os.path.join(out, "tokens.npy"),
        rng.integers(0, 151936, size=(8, 32), dtype=np.int64))
print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M "
      "parameters")
