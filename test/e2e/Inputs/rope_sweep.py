#!/usr/bin/env python3
"""Llama 3 RoPE scaling over a sweep of configurations (factor 2 to 32,
low/high frequency factors, original_max_position_embeddings 16 to 8192,
theta 1e4 to 1e6, head_dim 16 to 64): each one-layer Llama is exported
(TorchScript folded, and the dynamo exporter for every fourth) and raised
by `tp-opt --tp-raise-onnx`, without and with its config.

The oracle is transformers: the parameters raising recorded on `tp.rotary`
are put back into a LlamaConfig and transformers' own
_compute_llama3_parameters (or the linear / default ones, where the
frequencies are those of a simpler type) must give the model's inv_freq.
With the config, the recorded parameters must be the config's.

  rope_sweep.py OUT_DIR [--dynamo-every N] [--limit N]

Prints one line per configuration and a closing 'raised N, wrong N'; without
torch / transformers in the venv (scripts/setup.sh --models installs them)
a 'skipped: ...' line, and succeeds: tp-unittests' RopeFitTest checks the
fit on transformers' frequencies of a larger sweep without them.
"""
import argparse
import contextlib
import io
import itertools
import os
import re
import subprocess
import sys
import warnings

try:
    import torch
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
except ImportError:
    print("skipped: torch and transformers are not installed in this venv "
          "(scripts/setup.sh --models installs them)")
    sys.exit(0)

warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()


def sweep():
    """(theta, factor, low, high, original, head_dim): every factor, theta
    and original length appear with several band cuts."""
    factors = [2.0, 4.0, 8.0, 16.0, 32.0]
    thetas = [10000.0, 50000.0, 500000.0, 1000000.0, 12345.0]
    bands = [(1.0, 4.0), (1.0, 2.0), (2.0, 8.0), (0.5, 16.0), (1.0, 32.0)]
    originals = [16, 64, 256, 1024, 8192, 100]
    head_dims = [16, 32, 64]
    out = []
    for k, (factor, theta, band, original) in enumerate(
            itertools.product(factors, thetas, bands, originals)):
        # A spread subset of the product, every value of each axis used.
        if k % 7:
            continue
        out.append((theta, factor, band[0], band[1], original,
                    head_dims[(k // 7) % len(head_dims)]))
    return out


def model_for(theta, factor, low, high, original, head_dim):
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=2 * head_dim, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim,
        intermediate_size=32, rms_norm_eps=1e-6, tie_word_embeddings=False,
        max_position_embeddings=2 * max(original, 2048),
        rope_parameters={"rope_type": "llama3", "rope_theta": theta,
                         "factor": factor, "low_freq_factor": low,
                         "high_freq_factor": high,
                         "original_max_position_embeddings": original})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return config, transformers.LlamaForCausalLM(config).eval()


class LogitsOnly(torch.nn.Module):
    def __init__(self, hf):
        super().__init__()
        for name, child in hf.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "hf", hf)

    def forward(self, input_ids, attention_mask):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                       use_cache=False).logits


def export(hf, path, dynamo):
    ids = torch.randint(0, 64, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    names = dict(input_names=["input_ids", "attention_mask"],
                 output_names=["logits"])
    with contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        if dynamo:
            torch.onnx.export(
                LogitsOnly(hf), (ids, mask), dynamo=True,
                dynamic_shapes={"input_ids": {0: "batch", 1: "seq"},
                                "attention_mask": {0: "batch", 1: "seq"}},
                **names).save(path)
        else:
            axes = {n: {0: "batch", 1: "seq"}
                    for n in ["input_ids", "attention_mask", "logits"]}
            torch.onnx.export(LogitsOnly(hf), (ids, mask), path, dynamo=False,
                              opset_version=17, do_constant_folding=True,
                              dynamic_axes=axes, **names)


ATTR = re.compile(r"(\w+) = ([-0-9.e+]+|\"\w+\")(?: : \w+)?")


def rotary_attrs(mlir):
    line = next(l for l in mlir.splitlines() if "tp.rotary" in l)
    attrs = dict(ATTR.findall(line[line.index("{"):line.index("}")]))
    return {k: v.strip('"') for k, v in attrs.items()}


def frequencies_of(attrs, head_dim):
    """transformers' inv_freq for the parameters raising recorded."""
    rope_type = attrs.get("rope_type", "default")
    params = {"rope_type": rope_type, "rope_theta": float(attrs["theta"])}
    if rope_type != "default":
        params["factor"] = float(attrs["factor"])
    if rope_type == "llama3":
        params["low_freq_factor"] = float(attrs["low_freq_factor"])
        params["high_freq_factor"] = float(attrs["high_freq_factor"])
        params["original_max_position_embeddings"] = int(
            attrs["original_max_position_embeddings"])
    config = transformers.LlamaConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim,
        max_position_embeddings=2 * max(
            params.get("original_max_position_embeddings", 0), 2048),
        rope_parameters=params)
    if rope_type == "default":
        base, dim = params["rope_theta"], head_dim
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64)
                               .to(torch.float) / dim))
    inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
    return inv_freq


def raise_model(tp_opt, onnx_path, config_path=None):
    cmd = [tp_opt, onnx_path]
    if config_path:
        cmd += [f"--tp-raise-onnx=hf-config={config_path}",
                f"--tp-check-hf-config=path={config_path}"]
    else:
        cmd += ["--tp-raise-onnx"]
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--raise-with", default="tp-opt",
                        help="the tp-opt binary")
    parser.add_argument("--dynamo-every", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--only", default="", help="a regex of names")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    passed = failed = 0
    configs = sweep()
    if args.limit:
        configs = configs[:args.limit]
    for n, (theta, factor, low, high, original, head_dim) in enumerate(configs):
        config, hf = model_for(theta, factor, low, high, original, head_dim)
        truth = hf.model.rotary_emb.inv_freq.detach()
        name = (f"theta{theta:g}_f{factor:g}_low{low:g}_high{high:g}"
                f"_orig{original}_d{head_dim}")
        if args.only and not re.search(args.only, name):
            continue
        config_path = os.path.join(args.out, name + ".json")
        with open(config_path, "w") as f:
            f.write(config.to_json_string())
        exporters = ["ts_fold"] + (["dynamo"] if n % args.dynamo_every == 0
                                   else [])
        for exporter in exporters:
            path = os.path.join(args.out, f"{name}_{exporter}.onnx")
            export(hf, path, exporter == "dynamo")
            for with_config in (False, True):
                label = f"{name} {exporter} {'config' if with_config else 'tables'}"
                run = raise_model(args.raise_with, path,
                                  config_path if with_config else None)
                problem = None
                if run.returncode != 0:
                    problem = run.stderr.strip().splitlines()[0]
                else:
                    attrs = rotary_attrs(run.stdout)
                    got = frequencies_of(attrs, head_dim)
                    err = ((got - truth).abs() / truth.abs()).max().item()
                    if err > 2e-5:
                        problem = f"frequencies differ by {err:.3g} ({attrs})"
                    elif with_config and (
                            attrs.get("rope_type") != "llama3"
                            or abs(float(attrs["factor"]) - factor) > 1e-9
                            or abs(float(attrs["low_freq_factor"]) - low) > 1e-9
                            or abs(float(attrs["high_freq_factor"]) - high) > 1e-9
                            or int(attrs["original_max_position_embeddings"])
                            != original):
                        problem = f"not the config's parameters: {attrs}"
                if problem:
                    failed += 1
                    print(f"FAIL {label}: {problem}")
                else:
                    passed += 1
                    print(f"ok {label}: {attrs.get('rope_type', 'default')}")
    print(f"raised {passed}, wrong {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
