#!/usr/bin/env python3
"""Builds the benchmark's medium Llama (hidden 512, 4 layers, 8 heads, 4 KV
heads, head_dim 64, MLP 1408, vocab 4096) with transformers'
LlamaForCausalLM and random weights (norms included), and exports it with the TorchScript
exporter (opset 17, constant folding, input_ids + attention_mask).

    make_model.py OUT_DIR [VOCAB [HEADS KV_HEADS MLP]]
    (needs scripts/setup.sh --models)

VOCAB (default 4096) changes only the vocabulary (bench/train/ab.sh builds
the model with Llama-2's 32000 to weigh the loss's memory); HEADS, KV_HEADS
and MLP the attention heads (of 64 features: hidden HEADS x 64) and the MLP
width (bench/forward/scaling.sh's uneven split: 9 over 3, 1407).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "test", "models"))
import torch  # noqa: E402
import transformers  # noqa: E402
from generate import LogitsOnly  # noqa: E402

CONFIG = dict(
    vocab_size=4096, hidden_size=512, num_hidden_layers=4,
    num_attention_heads=8, num_key_value_heads=4, head_dim=64,
    intermediate_size=1408, rms_norm_eps=1e-6, rope_theta=10000.0,
    tie_word_embeddings=False)


def medium_llama(config):
    """The benchmark's LlamaForCausalLM: seed 0, and random RMS-norm weights
    (transformers' default ones are all equal, and the exporter folds equal
    initializers into one shared parameter: the compiled program would train
    one norm weight where PyTorch trains nine). bench/train/torch_step.py
    builds its peer with this too."""
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    vocab = int(sys.argv[2]) if len(sys.argv) > 2 else CONFIG["vocab_size"]
    shape = {}
    if len(sys.argv) > 5:
        shape = dict(num_attention_heads=int(sys.argv[3]),
                     num_key_value_heads=int(sys.argv[4]),
                     intermediate_size=int(sys.argv[5]),
                     hidden_size=64 * int(sys.argv[3]))
    config = transformers.LlamaConfig(**{**CONFIG, "vocab_size": vocab,
                                         **shape})
    model = LogitsOnly(medium_llama(config).eval()).eval()
    ids = torch.randint(0, vocab, (2, 16))
    mask = torch.ones_like(ids)
    axes = {n: {0: "batch", 1: "seq"} for n in ["input_ids", "attention_mask", "logits"]}
    torch.onnx.export(model, (ids, mask), os.path.join(out, "model.onnx"),
                      dynamo=False, opset_version=17, do_constant_folding=True,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], dynamic_axes=axes)
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config.to_json_string())
    print(os.path.join(out, "model.onnx"))
