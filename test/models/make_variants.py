#!/usr/bin/env python3
"""Variants of the generated Llama that real checkpoints have
(generate.VARIANTS: RoPE scaling types, biases on every projection, tied
embeddings with head_dim != hidden / heads): builds each from its config
(random weights, generate.py's seed), and writes VARIANT/ as generate.py
writes an architecture, with the TorchScript (folded) and dynamo exports
only:
  config.json, ts_fold.onnx, dynamo.onnx, ref/{input_ids,attention_mask,
  logits}_{b1_s5,b3_s12_pad}.npy (PyTorch's logits); for bf16 / f16
  checkpoints also ref/logits_upcast_*.npy (PyTorch in float32 on the
  rounded weights)

Needs the model tools (scripts/setup.sh --models).
"""
import argparse
import contextlib
import inspect
import os
import textwrap
import sys
import warnings

import numpy as np
import torch

import generate

warnings.filterwarnings("ignore")


@contextlib.contextmanager
def remote_code_in_proj_split():
    """transformers' Mamba2 mixer as NVIDIA's remote code
    (modeling_nemotron_h.py) splits its in_proj output: into five pieces,
    the first two of d_mlp = 0 features, instead of three. The dynamo
    exporter keeps them: one Split with five outputs, three of them used."""
    import transformers.models.nemotron_h.modeling_nemotron_h as nh
    mixer = next(c for n, c in vars(nh).items()
                 if isinstance(c, type) and n.endswith("Mamba2Mixer"))
    original = mixer.forward
    lines = textwrap.dedent(inspect.getsource(original)).split("\n")
    i = next(k for k, line in enumerate(lines)
             if "gate, hidden_states_B_C, dt = projected_states.split(" in line)
    assert lines[i + 2].strip() == ")", "transformers' mixer changed"
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[i:i + 3] = [
        indent + "d_mlp = (projected_states.shape[-1] - 2 * self.intermediate_size"
        " - 2 * self.n_groups * self.ssm_state_size - self.num_heads) // 2",
        indent + "_, _, gate, hidden_states_B_C, dt = projected_states.split("
        "[d_mlp, d_mlp, self.intermediate_size, self.conv_dim, self.num_heads], dim=-1)"]
    scope = {}
    exec(compile("\n".join(lines), nh.__file__, "exec"), nh.__dict__, scope)
    mixer.forward = scope["forward"]
    try:
        yield
    finally:
        mixer.forward = original


def make_variant(name, out):
    with (remote_code_in_proj_split() if name == "nemotron_h_backbone"
          else contextlib.nullcontext()):
        make_variant_as_built(name, out)


def make_variant_as_built(name, out):
    config, hf = generate.build(name)
    dtype = generate.VARIANT_DTYPES.get(name)
    upcast = None
    if dtype:
        # As from_pretrained(dtype=...) builds it, with the weights rounded;
        # and the float32 model on those rounded weights (what tp-opt, which
        # computes in float32, must match exactly).
        rounded = {k: v.to(dtype) for k, v in hf.state_dict().items()}
        hf = type(hf)._from_config(config, dtype=dtype)
        hf.load_state_dict(rounded, strict=False)
        hf.eval()
        upcast = type(hf)._from_config(config, dtype=torch.float32)
        upcast.load_state_dict({k: v.float() for k, v in rounded.items()},
                               strict=False)
        upcast = generate.LogitsOnly(upcast.eval()).eval()
        # _from_config records its dtype in the config: the checkpoint's.
        config.dtype = dtype
    model = generate.LogitsOnly(hf, generate.VARIANT_ROOTS.get(name)).eval()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config.to_json_string())
    generate.export_folded_and_dynamo(
        model, out,
        dynamo_opsets=() if name in generate.TORCHSCRIPT_ONLY
        else (None, 23) if name in generate.OPSET23_TOO else (None,),
        torchscript=name not in generate.DYNAMO_ONLY,
        unfolded=name in generate.UNFOLDED_TOO)
    if name in generate.DYNAMO_ONLY:
        # torch.export leaves state in the module it traced (LongRoPE caches
        # its long factors as a plain attribute while tracing): the
        # references come from the same model built anew.
        _, hf = generate.build(name)
        model = generate.LogitsOnly(hf, generate.VARIANT_ROOTS.get(name)).eval()
    ref = os.path.join(out, "ref")
    os.makedirs(ref, exist_ok=True)
    for i, (tag, shape) in enumerate(generate.REF_SHAPES.items()):
        vocab = (config.vocab_size if name in generate.WHOLE_VOCAB_IDS
                 else generate.VOCAB)
        ids_r, mask_r = generate.inputs_for(shape, tag.endswith("pad"), 10 + i,
                                            vocab)
        with torch.no_grad():
            logits = model(ids_r, mask_r).float().numpy()
        np.save(os.path.join(ref, f"input_ids_{tag}.npy"), ids_r.numpy())
        np.save(os.path.join(ref, f"attention_mask_{tag}.npy"), mask_r.numpy())
        np.save(os.path.join(ref, f"logits_{tag}.npy"), logits)
        if upcast is not None:
            with torch.no_grad():
                np.save(os.path.join(ref, f"logits_upcast_{tag}.npy"),
                        upcast(ids_r, mask_r).float().numpy())
    print(f"  {name}: written")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--variant", nargs="*", default=list(generate.VARIANTS))
    args = parser.parse_args()
    for name in args.variant:
        make_variant(name, os.path.join(args.out, name))


if __name__ == "__main__":
    sys.exit(main())
