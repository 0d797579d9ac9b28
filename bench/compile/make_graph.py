#!/usr/bin/env python3
"""Writes a Llama-3-70B-shaped decoder (hidden 8192, 64 heads, 8 KV heads of
128, MLP 28672, vocab 128256, untied) with L layers as an opset-23 ONNX graph
(RMSNormalization, RotaryEmbedding, Attention, MatMul on [in, out] weights,
the form of the fused-operator exports) whose weights are external data in
one sparse file: every initializer gets its own byte range, the file is
extended to its full size and never written, so nothing but the graph costs
disk. The RoPE caches stay inline (raising reads them to recover theta).

Usage: make_graph.py OUTDIR LAYERS"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sparse_weights import SparseWeights  # noqa: E402

out, L = sys.argv[1], int(sys.argv[2])
V, H, NH, KV, D, I, MAXPOS, THETA = 128256, 8192, 64, 8, 128, 28672, 4096, 500000.0
os.makedirs(out, exist_ok=True)
nodes, inits, weights = [], [], SparseWeights()


def external(name, shape):
    inits.append(weights.tensor(name, shape))
    return name


def const(name, value):
    inits.append(numpy_helper.from_array(np.asarray(value), name))
    return name


def node(op, inputs, scope, **attrs):
    name = f"{scope}/{op}_{len(nodes)}"
    nodes.append(helper.make_node(op, inputs, [name + "_out"], name=name, **attrs))
    return name + "_out"


inv_freq = 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float32) / D)
angles = np.outer(np.arange(MAXPOS, dtype=np.float32), inv_freq).astype(np.float32)
const("cos_cache", np.cos(angles).astype(np.float32))
const("sin_cache", np.sin(angles).astype(np.float32))

h = node("Gather", [external("model.embed_tokens.weight", [V, H]), "input_ids"], "/model/embed_tokens")
shape = node("Shape", ["input_ids"], "/model")
seq = node("Gather", [shape, const("one", 1)], "/model", axis=0)
batch = node("Gather", [shape, const("zero", 0)], "/model", axis=0)
ar = node("Range", [const("zero_r", 0), seq, const("one_r", 1)], "/model")
target = node("Concat", [node("Unsqueeze", [batch, const("ax0", [0])], "/model"),
                         node("Unsqueeze", [seq, const("ax0b", [0])], "/model")], "/model", axis=0)
pos = node("Expand", [node("Unsqueeze", [ar, const("ax0c", [0])], "/model"), target], "/model")
causal = node("LessOrEqual", [node("Unsqueeze", [ar, const("ax0d", [0])], "/model"),
                              node("Unsqueeze", [ar, const("ax1", [1])], "/model")], "/model")
pad = node("Unsqueeze", [node("Cast", ["attention_mask"], "/model", to=TensorProto.BOOL), const("ax12", [1, 2])], "/model")
mask = node("And", [causal, pad], "/model")

for l in range(L):
    p, m = f"/model/layers.{l}", f"model.layers.{l}"
    mm = lambda x, name, fi, fo: node("MatMul", [x, external(f"{m}.{name}.weight.T", [fi, fo])],
                                      p + "/" + name.replace(".", "/"))
    x = node("RMSNormalization", [h, external(f"{m}.input_layernorm.weight", [H])], p + "/input_layernorm",
             axis=-1, epsilon=1e-5)
    q = node("RotaryEmbedding", [mm(x, "self_attn.q_proj", H, NH * D), "cos_cache", "sin_cache", pos],
             p + "/self_attn/q_rotary", num_heads=NH)
    k = node("RotaryEmbedding", [mm(x, "self_attn.k_proj", H, KV * D), "cos_cache", "sin_cache", pos],
             p + "/self_attn/k_rotary", num_heads=KV)
    v = mm(x, "self_attn.v_proj", H, KV * D)
    o = node("Attention", [q, k, v, mask], p + "/self_attn", q_num_heads=NH, kv_num_heads=KV)
    h = node("Add", [h, mm(o, "self_attn.o_proj", NH * D, H)], p)
    y = node("RMSNormalization", [h, external(f"{m}.post_attention_layernorm.weight", [H])],
             p + "/post_attention_layernorm", axis=-1, epsilon=1e-5)
    gate = mm(y, "mlp.gate_proj", H, I)
    act = node("Mul", [gate, node("Sigmoid", [gate], p + "/mlp/act_fn")], p + "/mlp/act_fn")
    h = node("Add", [h, mm(node("Mul", [act, mm(y, "mlp.up_proj", H, I)], p + "/mlp"), "mlp.down_proj", I, H)], p)

f = node("RMSNormalization", [h, external("model.norm.weight", [H])], "/model/norm", axis=-1, epsilon=1e-5)
nodes.append(helper.make_node("MatMul", [f, external("lm_head.weight.T", [H, V])], ["logits"], name="/lm_head/MatMul"))
graph = helper.make_graph(
    nodes, f"llama70b_shaped_{L}", 
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
     helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])], initializer=inits)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10),
     os.path.join(out, "model.onnx"))
weights.write(out)
print(f"{out}/model.onnx: {L} layers, {weights.offset / 2**30:.1f} GiB of weights (sparse)")
