#!/usr/bin/env python3
"""Writes a Llama-3-70B-shaped LlamaForCausalLM (hidden 8192, 64 heads, 8 KV
heads, MLP 28672, vocab 128256, untied, eager attention) with L layers as
the dynamo exporter writes it, without ever materialising a weight: the
model is built on the meta device (only the RoPE inv_freq buffer is real),
exported with torch.onnx.export(dynamo=True, optimize=False), optimized with
onnxscript's default optimizer while the weights are graph inputs (so
nothing folds them), and the weights then become external-data initializers
at consecutive byte ranges of one sparse file that is never written.

Usage: export_dynamo.py OUTDIR LAYERS     (needs scripts/setup.sh --models)

bench/large imports export_meta for other shapes."""
import os
import sys

import onnx
import onnxscript
import torch
import transformers
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "test", "models"))
sys.path.insert(0, here)
from generate import LogitsOnly  # noqa: E402
from sparse_weights import SparseWeights  # noqa: E402

SHAPE_70B = dict(
    vocab_size=128256, hidden_size=8192, num_attention_heads=64,
    num_key_value_heads=8, head_dim=128, intermediate_size=28672,
    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False)


def export_meta(config, out):
    """Exports LlamaForCausalLM(config), built on the meta device, to
    OUT/model.onnx with its weights as a sparse OUT/weights.bin; returns the
    number of graph nodes and the weights' bytes."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    config._attn_implementation = "eager"
    with torch.device("meta"):
        model = LogitsOnly(transformers.LlamaForCausalLM(config).eval()).eval()
    rotary = model.model.rotary_emb
    head_dim = config.head_dim
    # transformers 5 keeps theta in rope_parameters.
    theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta") or config.rope_theta
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rotary.register_buffer("inv_freq", inv_freq, persistent=False)
    rotary.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    ids = torch.zeros((2, 16), dtype=torch.int64)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    program = torch.onnx.export(
        model, (ids, torch.ones_like(ids)), dynamo=True, optimize=False,
        dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
        input_names=["input_ids", "attention_mask"], output_names=["logits"])
    program.save(path, include_initializers=False)

    proto = onnx.load(path)
    graph = proto.graph
    defined = {i.name for i in graph.input} | {o for n in graph.node for o in n.output}
    # remove_duplicate=False: a tied table is named as the graph names it.
    tensors = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers())
    weights = []
    for name in dict.fromkeys(x for n in graph.node for x in n.input if x and x not in defined):
        t = tensors[name]
        if t.device.type == "meta":
            graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(t.shape)))
            weights.append((name, list(t.shape)))
        else:
            graph.initializer.append(numpy_helper.from_array(t.numpy(), name))
    proto = onnxscript.optimizer.optimize(proto)
    graph = proto.graph
    names = {name for name, _ in weights}
    inputs = [i for i in graph.input if i.name not in names]
    del graph.input[:]
    graph.input.extend(inputs)
    sparse = SparseWeights()
    graph.initializer.extend(sparse.tensor(name, shape) for name, shape in weights)
    onnx.save(proto, path)
    sparse.write(out)
    return len(graph.node), sparse.offset


if __name__ == "__main__":
    out, layers = sys.argv[1], int(sys.argv[2])
    nodes, size = export_meta(transformers.LlamaConfig(num_hidden_layers=layers, **SHAPE_70B), out)
    print(f"{os.path.join(out, 'model.onnx')}: {layers} layers, {nodes} nodes, "
          f"{size / 2**30:.1f} GiB of weights (sparse)")
