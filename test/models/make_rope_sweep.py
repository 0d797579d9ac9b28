#!/usr/bin/env python3
"""transformers' Llama 3 RoPE frequencies over a sweep of configurations,
the oracle of tp-unittests' RopeFitTest (test/unit/RopeFitTest.cpp):

  rope_llama3_sweep.json: {"configurations": [{"theta", "factor", "low_freq_factor",
    "high_freq_factor", "original_max_position_embeddings", "head_dim",
    "inv_freq": [head_dim / 2 float32 values]}, ...]}

The inverse frequencies are those transformers' _compute_llama3_parameters
gives (float32, as the model's rotary_emb.inv_freq buffer holds them and an
export's tables show them): factor 2 to 32, low/high frequency factors
(the bands they cut), original_max_position_embeddings 16 to 8192, theta
1e4 to 1e6 (and an unround one), head_dim 16 to 128.

    .venv/bin/python test/models/make_rope_sweep.py [--out test/models]

Needs the model tools (scripts/setup.sh --models).
"""
import argparse
import itertools
import json
import os
import warnings

import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

FACTORS = [2.0, 4.0, 8.0, 16.0, 32.0]
THETAS = [10000.0, 50000.0, 500000.0, 1000000.0, 12345.0]
BANDS = [(1.0, 4.0), (1.0, 2.0), (2.0, 8.0), (0.5, 16.0), (1.0, 32.0),
         (1.0, 1.5)]
ORIGINALS = [16, 32, 64, 100, 256, 1024, 4096, 8192]
HEAD_DIMS = [16, 32, 64, 128]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args()
    entries = []
    for k, (factor, theta, (low, high), original) in enumerate(
            itertools.product(FACTORS, THETAS, BANDS, ORIGINALS)):
        # Every third of the product; each value of every axis appears.
        if k % 3:
            continue
        head_dim = HEAD_DIMS[(k // 3) % len(HEAD_DIMS)]
        config = transformers.LlamaConfig(
            hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
            max_position_embeddings=2 * max(original, 2048),
            rope_parameters={"rope_type": "llama3", "rope_theta": theta,
                             "factor": factor, "low_freq_factor": low,
                             "high_freq_factor": high,
                             "original_max_position_embeddings": original})
        inv_freq, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
        entries.append({
            "theta": theta, "factor": factor, "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": original,
            "head_dim": head_dim,
            # float32 values, printed exactly.
            "inv_freq": [float(f) for f in inv_freq.tolist()]})
    path = os.path.join(args.out, "rope_llama3_sweep.json")
    with open(path, "w") as f:
        json.dump({"configurations": entries}, f, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(entries)} configurations")


if __name__ == "__main__":
    main()
