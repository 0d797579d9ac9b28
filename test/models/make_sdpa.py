#!/usr/bin/env python3
"""The generated models exported as users export them by default: with
transformers' `sdpa` attention (what building from a config and
`from_pretrained` pick), by both exporters.

For each architecture, rebuilds the model generate.py exported (same seed
and weights) with attn_implementation="sdpa", checks that PyTorch's logits
equal the committed eager reference at every position the attention mask
keeps, and writes ARCH/sdpa/:
  ts_fold.onnx               TorchScript exporter, opset 17, constant folding
                             (SDPA as q k^T with sqrt(scale) on each side, a
                             boolean mask, and an IsNaN guard)
  dynamo.onnx                the dynamo exporter (aten SDPA decomposed, k
                             transposed through a [batch * heads] reshape)
  dynamo_opset23.onnx        the dynamo exporter at opset 23: ONNX's fused
                             Attention, RotaryEmbedding and RMSNormalization
  logits_b3_s12_pad.npy      PyTorch's logits of the sdpa model at
                             ref/input_ids_b3_s12_pad.npy

Needs the model tools (scripts/setup.sh --models).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch

import generate

warnings.filterwarnings("ignore")


def make_sdpa(arch, out):
    _, hf = generate.build(arch, attn="sdpa")
    model = generate.LogitsOnly(hf).eval()
    ids, mask = generate.inputs_for(generate.REF_SHAPES["b3_s12_pad"], True, 11)
    ref = np.load(os.path.join(out, "ref", "logits_b3_s12_pad.npy"))
    with torch.no_grad():
        logits = model(ids, mask).float().numpy()
    kept = mask.numpy().astype(bool)
    drift = np.abs(logits[kept] - ref[kept]).max()
    if drift > 1e-5:
        sys.exit(f"{arch}: the sdpa model differs from the eager reference "
                 f"({drift:.3g}) where the mask keeps positions")
    sdpa = os.path.join(out, "sdpa")
    os.makedirs(sdpa, exist_ok=True)
    generate.export_folded_and_dynamo(model, sdpa, dynamo_opsets=(None, 23))
    np.save(os.path.join(sdpa, "logits_b3_s12_pad.npy"), logits)
    print(f"  {arch}: sdpa exports written; max |sdpa - eager| at kept "
          f"positions {drift:.3g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--arch", nargs="*", default=[
        a for a in generate.ARCHS if a not in generate.VARIANTS])
    args = parser.parse_args()
    for arch in args.arch:
        make_sdpa(arch, os.path.join(args.out, arch))


if __name__ == "__main__":
    sys.exit(main())
