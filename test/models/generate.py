#!/usr/bin/env python3
"""Builds tiny decoder LMs of the five supported architectures with the real
HuggingFace `transformers` classes (random weights from a fixed seed, nothing
downloaded), exports each with PyTorch's exporters and writes reference
logits computed by PyTorch.

    .venv/bin/python test/models/generate.py [--out test/models] [--arch NAME ...]

Needs requirements-models.txt (scripts/setup.sh --models). The outputs are
committed, so the test suite needs neither torch nor transformers.

Per architecture ARCH, under OUT/ARCH/:
  config.json               the HF config the model was built from
  ts_fold.onnx              TorchScript exporter (dynamo=False), opset 17,
                            constant folding on (anonymous pre-transposed
                            onnx::MatMul_N weights)
  ts_nofold.onnx            the same with constant folding off (FQN weights
                            behind Transpose nodes)
  dynamo.onnx               the dynamo exporter (PyTorch's default) at its
                            default opset, weights inline
  external/model.onnx       the dynamo export with its weights in ONNX
           model.onnx.data  external data
  ref/input_ids_*.npy, ref/attention_mask_*.npy, ref/logits_*.npy
                            two input shapes other than the traced one; the
                            second has left padding in row 0 and right
                            padding in the last row
Exporters that cannot export an architecture are reported (and recorded in
OUT/ARCH/EXPORT_ERRORS.txt) instead of failing the whole run.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import traceback
import warnings

import numpy as np
import torch
import transformers

warnings.filterwarnings("ignore")

VOCAB = 128
TRACE_SHAPE = (2, 8)
REF_SHAPES = {"b1_s5": (1, 5), "b3_s12_pad": (3, 12)}


def llama():
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=False), transformers.LlamaForCausalLM


def qwen2():
    return transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False), transformers.Qwen2ForCausalLM


def qwen3():
    return transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False), transformers.Qwen3ForCausalLM


def gemma3():
    return transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, rms_norm_eps=1e-6, query_pre_attn_scalar=16,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        tie_word_embeddings=True), transformers.Gemma3ForCausalLM


def nemotron_h():
    return transformers.NemotronHConfig(
        vocab_size=VOCAB, hidden_size=64,
        layers_block_type=["mamba", "attention", "mlp"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, mamba_num_heads=4, mamba_head_dim=16,
        n_groups=2, ssm_state_size=8, conv_kernel=4, chunk_size=8,
        use_mamba_kernels=False, layer_norm_epsilon=1e-5,
        tie_word_embeddings=False), transformers.NemotronHForCausalLM


ARCHS = {"llama": llama, "qwen2": qwen2, "qwen3": qwen3, "gemma3": gemma3,
         "nemotron_h": nemotron_h}


def llama_with(**changes):
    """The Llama above with some config fields changed (make_variants.py)."""
    config, cls = llama()
    for key, value in changes.items():
        setattr(config, key, value)
    return config, cls


def variant_of(base, **changes):
    """Architecture `base` (a function above) with config fields changed."""
    config, cls = base()
    for key, value in changes.items():
        setattr(config, key, value)
    return config, cls


def llama_rope(rope_parameters):
    return llama_with(rope_parameters=rope_parameters)


# Variants of the Llama that real checkpoints have, exported by
# make_variants.py (not by default).
VARIANTS = {
    # Llama 3.1's (theta 500000, factor 8, low 1, high 4, 8192 positions):
    # with head_dim 16, frequencies in all three bands.
    "llama_rope_llama3": lambda: llama_rope({
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}),
    # Llama 3 scaling over 16 original positions: no frequency is kept (the
    # highest is blended, the others divided by 16), the bands Llama 3.1's
    # 8192 positions give cut nowhere near.
    "llama_rope_llama3_short": lambda: llama_rope({
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 16.0,
        "low_freq_factor": 1.0, "high_freq_factor": 16.0,
        "original_max_position_embeddings": 16}),
    "llama_rope_linear": lambda: llama_rope({
        "rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}),
    # Dynamic NTK scaling: default RoPE up to max_position_embeddings (8
    # here, so the traced [2, 8] exports default tables), a larger base for
    # longer sequences (the reference's 12 positions).
    # LongRoPE (Phi-3's type): per-pair factors, short up to 8 positions,
    # long beyond (the references' 12).
    "llama_rope_longrope": lambda: llama_with(
        max_position_embeddings=16,
        rope_parameters={
            "rope_type": "longrope", "rope_theta": 10000.0,
            "original_max_position_embeddings": 8,
            "short_factor": [1.0, 1.1, 1.2, 1.3, 1.5, 1.8, 2.0, 2.5],
            "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]}),
    "llama_rope_dynamic": lambda: llama_with(
        max_position_embeddings=8,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0,
                         "factor": 2.0}),
    # Qwen2.5's long-context scaling: YaRN (factor 4 over 4096 original
    # positions: with head_dim 16 its ramp spans dimensions 2 to 6).
    "qwen2_rope_yarn": lambda: variant_of(qwen2, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 4096}),
    # Biases on every projection, the row-split o_proj and down_proj too.
    "llama_bias": lambda: llama_with(attention_bias=True, mlp_bias=True),
    # Tied embeddings (Llama 3.2's small checkpoints) and a head_dim that is
    # not hidden / heads (24, not 16: q and o are 96 wide).
    "llama_tied_headdim": lambda: llama_with(tie_word_embeddings=True,
                                             head_dim=24),
    # Tied embeddings on a square table (vocabulary = hidden size = 128): the
    # folded export's transposed lm_head copy is square too.
    "llama_tied_square": lambda: llama_with(tie_word_embeddings=True,
                                            hidden_size=128),
    # Qwen2.5 / Qwen3 small checkpoints tie their embeddings.
    "qwen2_tied": lambda: variant_of(qwen2, tie_word_embeddings=True),
    "qwen3_tied": lambda: variant_of(qwen3, tie_word_embeddings=True),
    # Gemma3 4B and larger: linear scaling (factor 8) on the global layers
    # only.
    "gemma3_linear_global": lambda: variant_of(gemma3, rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0,
                           "rope_theta": 1000000.0}}),
    # NemotronH under the remote code's names (backbone.embeddings,
    # backbone.layers.N.mixer, backbone.norm_f): see VARIANT_ROOTS.
    "nemotron_h_backbone": nemotron_h,
    # Gemma3 with final_logit_softcapping (Gemma 2's, which Gemma3's
    # config still takes): the soft-cap follows the tied lm_head.
    "gemma3_softcap": lambda: variant_of(gemma3, final_logit_softcapping=30.0),
    # A Llama decoder with fused projections (Phi-3's qkv_proj and
    # gate_up_proj): the exporters split their outputs with Slice and Split
    # nodes.
    "phi3_fused": lambda: (transformers.Phi3Config(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=False, pad_token_id=None, bos_token_id=1,
        eos_token_id=2,
        max_position_embeddings=256, original_max_position_embeddings=256),
        transformers.Phi3ForCausalLM),
    # Gemma3's real pattern: five sliding-window layers, then a global one.
    "gemma3_6layers": lambda: variant_of(
        gemma3, num_hidden_layers=6,
        layer_types=["sliding_attention"] * 5 + ["full_attention"]),
    # Gemma 3 1B's grouping: every query head over one KV head, whose
    # k_norm is then a norm over the whole projection.
    "gemma3_kv1": lambda: variant_of(gemma3, num_key_value_heads=1),
    # NemotronH whose B and C per group are as wide as x per head
    # (n_groups x state_size = 4 x 16 = mamba heads x head_dim = 8 x 8):
    # the two reshapes that reveal the sizes both fit.
    "nemotron_h_groups": lambda: variant_of(
        nemotron_h, mamba_num_heads=8, mamba_head_dim=8, n_groups=4,
        ssm_state_size=16),
    # Shapes that do not divide by tp 3, 4, 5 (tpc --allow-uneven): 6 or 14
    # query heads over 2 or 3 KV heads, MLP 224, vocabulary 321.
    "llama_uneven": lambda: llama_with(
        num_attention_heads=6, num_key_value_heads=2, intermediate_size=224,
        vocab_size=321),
    "qwen2_uneven": lambda: variant_of(
        qwen2, hidden_size=96, num_attention_heads=6, num_key_value_heads=3,
        intermediate_size=224, vocab_size=321),
    "qwen3_uneven": lambda: variant_of(
        qwen3, num_attention_heads=14, num_key_value_heads=2, head_dim=8,
        intermediate_size=224, vocab_size=321),
    "gemma3_uneven": lambda: variant_of(
        gemma3, num_attention_heads=6, num_key_value_heads=2,
        intermediate_size=224, vocab_size=321),
    # NemotronH: the attention and MLP layers uneven (its Mamba mixers run
    # replicated).
    "nemotron_h_uneven": lambda: variant_of(
        nemotron_h, num_attention_heads=6, num_key_value_heads=2,
        intermediate_size=224, vocab_size=321),
}
# Variants whose reference ids span their whole vocabulary (not the first
# VOCAB ids): every rank's part of an uneven vocabulary is looked up.
WHOLE_VOCAB_IDS = {"llama_uneven", "qwen2_uneven", "qwen3_uneven",
                   "gemma3_uneven", "nemotron_h_uneven"}
ARCHS.update(VARIANTS)
# Variants torch.export cannot trace (dynamic RoPE recomputes its
# frequencies behind a data-dependent branch), and the uneven shapes, whose
# tests need one export: TorchScript only; and those
# the TorchScript exporter cannot (LongRoPE copies its choice of factors
# into the inv_freq buffer, aten::copy_): dynamo only.
TORCHSCRIPT_ONLY = {"llama_rope_dynamic", "llama_tied_square"} | WHOLE_VOCAB_IDS
DYNAMO_ONLY = {"llama_rope_longrope"}
# Variants exported with the inner model under another name.
VARIANT_ROOTS = {"nemotron_h_backbone": "backbone"}
# Variants also exported by TorchScript without constant folding (the
# remote code's five-way in_proj Split as the unfolded graph holds it; the
# fused projections' Slices).
UNFOLDED_TOO = {"nemotron_h_backbone", "phi3_fused"}
# Variants also exported by the dynamo exporter at opset 23, whose fused
# RotaryEmbedding takes the cos/sin caches (dynamo_opset23.onnx).
OPSET23_TOO = {"llama_rope_llama3_short"}
# Checkpoints in bf16 / f16, as from_pretrained(dtype=...) builds them (the
# rotary inverse frequencies stay float32): the Llama's weights rounded.
VARIANTS["llama_bf16"] = llama
VARIANTS["llama_f16"] = llama
VARIANTS["qwen2_bf16"] = qwen2
VARIANTS["qwen3_bf16"] = qwen3
VARIANTS["gemma3_bf16"] = gemma3
VARIANTS["nemotron_h_bf16"] = nemotron_h
ARCHS.update(VARIANTS)
VARIANT_DTYPES = {"llama_bf16": torch.bfloat16, "llama_f16": torch.float16,
                  "qwen2_bf16": torch.bfloat16, "qwen3_bf16": torch.bfloat16,
                  "gemma3_bf16": torch.bfloat16,
                  "nemotron_h_bf16": torch.bfloat16}


class LogitsOnly(torch.nn.Module):
    """Exposes (input_ids, attention_mask) -> logits. The HF model's children
    are registered directly so that parameter FQNs and module scopes are the
    HF ones (model.layers.0...), not prefixed by this wrapper."""

    def __init__(self, hf, root=None):
        super().__init__()
        for name, child in hf.named_children():
            # `root` renames the inner model (NemotronH's remote code calls
            # it `backbone`).
            self.add_module(root if root and name == "model" else name, child)
        object.__setattr__(self, "hf", hf)

    def forward(self, input_ids, attention_mask):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                       use_cache=False).logits


def inputs_for(shape, padded, seed, vocab=VOCAB):
    g = torch.Generator().manual_seed(seed)
    batch, seq = shape
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    if padded:
        mask[0, :3] = 0
        mask[-1, -2:] = 0
    return ids, mask


def build(arch, attn="eager"):
    """The HF model of `arch` with the weights every export holds, with the
    attention implementation `attn` (eager, or transformers' default sdpa:
    make_sdpa.py)."""
    config, cls = ARCHS[arch]()
    config._attn_implementation = attn
    torch.manual_seed(1234)
    hf = cls(config).eval()
    # Random (not default) norm weights so that a wrong norm parameter or
    # offset changes the logits.
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.empty_like(p).uniform_(0.5, 1.5)
                        if "norm" in name else torch.randn_like(p) * 0.1)
    return config, hf


def export_folded_and_dynamo(model, out, dynamo_opsets=(None,), torchscript=True,
                             unfolded=False):
    """`model` (a LogitsOnly) exported to out/ts_fold.onnx (TorchScript,
    opset 17, constant folding; with `unfolded` also out/ts_nofold.onnx,
    without it) and, per entry of `dynamo_opsets`, to
    out/dynamo.onnx (the dynamo exporter's default opset: None) or
    out/dynamo_opsetN.onnx, traced at TRACE_SHAPE with dynamic batch and
    sequence."""
    ids, mask = inputs_for(TRACE_SHAPE, False, 0)
    names = dict(input_names=["input_ids", "attention_mask"],
                 output_names=["logits"])
    axes = {n: {0: "batch", 1: "seq"}
            for n in ["input_ids", "attention_mask", "logits"]}
    with contextlib.redirect_stdout(io.StringIO()):
        if torchscript:
            torch.onnx.export(model, (ids, mask), os.path.join(out, "ts_fold.onnx"),
                              dynamo=False, opset_version=17,
                              do_constant_folding=True, dynamic_axes=axes, **names)
        if torchscript and unfolded:
            torch.onnx.export(model, (ids, mask), os.path.join(out, "ts_nofold.onnx"),
                              dynamo=False, opset_version=17,
                              do_constant_folding=False, dynamic_axes=axes, **names)
        for opset in dynamo_opsets:
            extra = {} if opset is None else {"opset_version": opset}
            program = torch.onnx.export(
                model, (ids, mask), dynamo=True,
                dynamic_shapes={"input_ids": {0: "batch", 1: "seq"},
                                "attention_mask": {0: "batch", 1: "seq"}},
                **extra, **names)
            name = "dynamo.onnx" if opset is None else f"dynamo_opset{opset}.onnx"
            program.save(os.path.join(out, name))


def rebuild_checked(arch, out):
    """The model of `arch` rebuilt, with the padded reference inputs and
    logits in `out`/ref; exits when it no longer reproduces them."""
    config, hf = build(arch)
    ids, mask = inputs_for(REF_SHAPES["b3_s12_pad"], True, 11,
                           config.vocab_size if arch in WHOLE_VOCAB_IDS
                           else VOCAB)
    ref = np.load(os.path.join(out, "ref", "logits_b3_s12_pad.npy"))
    with torch.no_grad():
        base = hf(input_ids=ids, attention_mask=mask, use_cache=False).logits
    drift = np.abs(base.numpy() - ref).max()
    if drift > 1e-5:
        sys.exit(f"{arch}: rebuilt model differs from the exported one "
                 f"({drift:.3g}); rerun generate.py first")
    return hf, ids, mask, ref


def export_all(arch, out):
    config, hf = build(arch)
    model = LogitsOnly(hf).eval()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config.to_json_string())

    ids, mask = inputs_for(TRACE_SHAPE, False, 0)
    names = dict(input_names=["input_ids", "attention_mask"],
                 output_names=["logits"])
    dyn_axes = {n: {0: "batch", 1: "seq"}
                for n in ["input_ids", "attention_mask", "logits"]}
    errors = []

    def attempt(label, fn):
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                fn()
            print(f"  {arch}: {label} ok")
        except Exception as e:  # record why an exporter cannot do it
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
            errors.append(f"{label}: {msg[:2000]}")
            print(f"  {arch}: {label} FAILED: {msg[:300]}")

    for fold in (True, False):
        path = os.path.join(out, f"ts_{'fold' if fold else 'nofold'}.onnx")
        attempt(os.path.basename(path), lambda: torch.onnx.export(
            model, (ids, mask), path, dynamo=False, opset_version=17,
            do_constant_folding=fold, dynamic_axes=dyn_axes, **names))

    dyn_shapes = {"input_ids": {0: "batch", 1: "seq"},
                  "attention_mask": {0: "batch", 1: "seq"}}

    def dynamo(path, external):
        program = torch.onnx.export(model, (ids, mask), dynamo=True,
                                    dynamic_shapes=dyn_shapes, **names)
        program.save(path, external_data=external)

    attempt("dynamo.onnx", lambda: dynamo(os.path.join(out, "dynamo.onnx"), False))
    ext_dir = os.path.join(out, "external")
    shutil.rmtree(ext_dir, ignore_errors=True)
    os.makedirs(ext_dir)
    attempt("external/model.onnx",
            lambda: dynamo(os.path.join(ext_dir, "model.onnx"), True))

    ref = os.path.join(out, "ref")
    os.makedirs(ref, exist_ok=True)
    for i, (tag, shape) in enumerate(REF_SHAPES.items()):
        ids_r, mask_r = inputs_for(shape, tag.endswith("pad"), 10 + i)
        with torch.no_grad():
            logits = model(ids_r, mask_r).float().numpy()
        np.save(os.path.join(ref, f"input_ids_{tag}.npy"), ids_r.numpy())
        np.save(os.path.join(ref, f"attention_mask_{tag}.npy"), mask_r.numpy())
        np.save(os.path.join(ref, f"logits_{tag}.npy"), logits)

    err_path = os.path.join(out, "EXPORT_ERRORS.txt")
    if errors:
        with open(err_path, "w") as f:
            f.write("\n\n".join(errors) + "\n")
    elif os.path.exists(err_path):
        os.remove(err_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--arch", nargs="*",
                        default=[a for a in ARCHS if a not in VARIANTS])
    args = parser.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for arch in args.arch:
        export_all(arch, os.path.join(args.out, arch))


if __name__ == "__main__":
    sys.exit(main())
