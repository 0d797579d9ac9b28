#!/usr/bin/env python3
"""Writes tiny decoder LMs built from fused ONNX operators, for raising and
end-to-end tests (onnxruntime is their reference):

  opset23.onnx  ONNX opset-23 RMSNormalization, RotaryEmbedding and
                Attention (GQA, causal, with the padding mask)
  gqa.onnx      msft.onnx with com.microsoft GroupQueryAttention (RoPE
                inside, do_rotary) and the KV-cache inputs and outputs the
                builder always writes (run with an empty cache)
  softcap.onnx  opset23.onnx with Gemma's final logit soft-capping
                (cap * tanh(logits / cap), cap 2)
  bias.onnx     opset23.onnx with biases on o_proj and down_proj (row-split
                under the Llama plan: added once, after the reduction)
  msft.onnx     com.microsoft SimplifiedLayerNormalization,
                SkipSimplifiedLayerNormalization and RotaryEmbedding, as
                onnxruntime-genai's model builder writes them (scopes
                /model/layers.N/attn/..., transposed MatMul.weight names)

Usage: make_fused.py OUTDIR"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# MAXPOS as long as real builders write it: caches beyond the importer's
# inline limit, which raising reads from the file.
V, H, NH, KV, D, I, L, MAXPOS, THETA = 64, 32, 4, 2, 8, 48, 2, 2048, 10000.0
rng = np.random.default_rng(7)


def w(*shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)




def rope_caches(d, theta):
    inv_freq = (1.0 / theta ** (np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / d)).astype(np.float32)
    angles = np.outer(np.arange(MAXPOS, dtype=np.float32), inv_freq).astype(np.float32)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, name, value):
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name, value):
        return self.init(name, np.array(value))

    def node(self, op, inputs, scope, domain="", outputs=1, **attrs):
        self.n += 1
        name = f"{scope}/{op}_{self.n}"
        outs = [f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain, **attrs))
        return outs[0] if outputs == 1 else outs


def positions(g):
    shape = g.node("Shape", ["input_ids"], "/model")
    seq = g.node("Gather", [shape, g.const("one_i", 1)], "/model", axis=0)
    rng_ = g.node("Range", [g.const("zero_i", 0), seq, g.const("one_i2", 1)], "/model")
    pos = g.node("Unsqueeze", [rng_, g.const("axes0", [0])], "/model")
    batch = g.node("Gather", [shape, g.const("zero_i2", 0)], "/model", axis=0)
    target = g.node("Concat", [g.node("Unsqueeze", [batch, g.const("axes0b", [0])], "/model"),
                               g.node("Unsqueeze", [seq, g.const("axes0c", [0])], "/model")], "/model", axis=0)
    return g.node("Expand", [pos, target], "/model")


def linear(g, x, name, fan_in, fan_out, msft, bias=False):
    # "model.layers.0.attn.q_proj" -> "model/layers.0/attn/q_proj"
    scope = name.replace(".", "/").replace("layers/", "layers.")
    wname = (name + ".MatMul.weight") if msft else f"onnx::MatMul_{len(g.inits)}"
    g.init(wname, w(fan_in, fan_out))
    y = g.node("MatMul", [x, wname], "/" + scope)
    if bias:
        y = g.node("Add", [y, g.init(name + ".bias", w(fan_out))], "/" + scope)
    return y


def build(msft, gqa=False, bias=False, softcap=None):
    global D
    # onnxruntime's GroupQueryAttention rotary wants head_dim % 16 == 0. The
    # opset-23 model has Llama 3's head_dim and base, where recovering theta
    # from f32 tables is most sensitive.
    D = 16 if gqa else 8 if msft else 128
    cos_cache, sin_cache = rope_caches(D, THETA if msft else 500000.0)
    g = Graph()
    attn = "attn" if msft else "self_attn"
    g.init("model.embed_tokens.weight", w(V, H, scale=1.0))
    g.init("cos_cache", cos_cache)
    g.init("sin_cache", sin_cache)
    h = g.node("Gather", ["model.embed_tokens.weight", "input_ids"], "/model/embed_tokens")
    pos = positions(g)
    mask_bool = g.node("Cast", ["attention_mask"], "/model", to=TensorProto.BOOL)
    # [B, 1, 1, S] boolean padding mask (True = attend), and with causality
    # [B, 1, S, S] (onnxruntime wants Attention-23's mask sized S_q x S_kv).
    mask4 = g.node("Unsqueeze", [mask_bool, g.const("axes12", [1, 2])], "/model")
    seq_m = g.node("Gather", [g.node("Shape", ["input_ids"], "/model"), g.const("one_m", 1)], "/model", axis=0)
    ar_m = g.node("Range", [g.const("z_m", 0), seq_m, g.const("o_m", 1)], "/model")
    causal_m = g.node("LessOrEqual", [g.node("Unsqueeze", [ar_m, g.const("a0_m", [0])], "/model"),
                                      g.node("Unsqueeze", [ar_m, g.const("a1_m", [1])], "/model")], "/model")
    full_mask = g.node("And", [causal_m, mask4], "/model")
    residual, skip_pending = h, None
    presents = []
    if gqa:
        # What the builder computes for GroupQueryAttention: valid lengths
        # minus one and the total length, as int32.
        msum = g.node("ReduceSum", ["attention_mask", g.const("ax1", [1])], "/model/attn_mask_reformat", keepdims=0)
        seqlens_k = g.node("Cast", [g.node("Sub", [msum, g.const("one64", np.int64(1))], "/model/attn_mask_reformat")],
                           "/model/attn_mask_reformat", to=TensorProto.INT32)
        total_len = g.node("Cast", [g.node("Gather", [g.node("Shape", ["attention_mask"], "/model/attn_mask_reformat"),
                                                      g.const("one_t", 1)], "/model/attn_mask_reformat", axis=0)],
                           "/model/attn_mask_reformat", to=TensorProto.INT32)
    for l in range(L):
        p = f"/model/layers.{l}"
        g.init(f"model.layers.{l}.input_layernorm.weight", (1 + w(H, scale=0.1)))
        g.init(f"model.layers.{l}.post_attention_layernorm.weight", (1 + w(H, scale=0.1)))
        if msft:
            if skip_pending is None:
                x = g.node("SimplifiedLayerNormalization", [residual, f"model.layers.{l}.input_layernorm.weight"],
                           p + "/input_layernorm", axis=-1, epsilon=1e-6)
            else:
                x, _, _, residual = g.node("SkipSimplifiedLayerNormalization",
                                           [residual, skip_pending, f"model.layers.{l}.input_layernorm.weight"],
                                           p + "/input_layernorm", domain="com.microsoft", outputs=4, epsilon=1e-6)
        else:
            x = g.node("RMSNormalization", [residual, f"model.layers.{l}.input_layernorm.weight"],
                       p + "/input_layernorm", axis=-1, epsilon=1e-6)
        q = linear(g, x, f"model.layers.{l}.{attn}.q_proj", H, NH * D, msft)
        k = linear(g, x, f"model.layers.{l}.{attn}.k_proj", H, KV * D, msft)
        v = linear(g, x, f"model.layers.{l}.{attn}.v_proj", H, KV * D, msft)
        if gqa:
            o = g.node("GroupQueryAttention",
                       [q, k, v, f"past_key_values.{l}.key", f"past_key_values.{l}.value",
                        seqlens_k, total_len, "cos_cache", "sin_cache"],
                       p + f"/{attn}/GroupQueryAttention", domain="com.microsoft", outputs=3,
                       num_heads=NH, kv_num_heads=KV, do_rotary=1, scale=float(D ** -0.5))
            presents += [(f"present.{l}.key", o[1]), (f"present.{l}.value", o[2])]
            o = o[0]
        elif msft:
            q = g.node("RotaryEmbedding", [q, pos, "cos_cache", "sin_cache"], p + f"/{attn}/q_rotary",
                       domain="com.microsoft", num_heads=NH, interleaved=0)
            k = g.node("RotaryEmbedding", [k, pos, "cos_cache", "sin_cache"], p + f"/{attn}/k_rotary",
                       domain="com.microsoft", num_heads=KV, interleaved=0)
            # Attention spelled out with standard ops (GroupQueryAttention
            # needs KV-cache inputs): [B,S,H*D] -> [B,H,S,D], repeat_kv.
            shp = lambda n: g.const(f"shape_{l}_{n}_{len(g.inits)}", [0, 0, n, D])
            qh = g.node("Transpose", [g.node("Reshape", [q, shp(NH)], p + f"/{attn}")], p + f"/{attn}", perm=[0, 2, 1, 3])
            kh = g.node("Transpose", [g.node("Reshape", [k, shp(KV)], p + f"/{attn}")], p + f"/{attn}", perm=[0, 2, 1, 3])
            vh = g.node("Transpose", [g.node("Reshape", [v, shp(KV)], p + f"/{attn}")], p + f"/{attn}", perm=[0, 2, 1, 3])
            def rep(t):
                u = g.node("Unsqueeze", [t, g.const(f"ax2_{len(g.inits)}", [2])], p + f"/{attn}")
                shape = g.node("Shape", [u], p + f"/{attn}")
                tgt = g.node("Mul", [shape, g.const(f"rep_{len(g.inits)}", [1, 1, NH // KV, 1, 1])], p + f"/{attn}")
                e = g.node("Expand", [u, tgt], p + f"/{attn}")
                return g.node("Reshape", [e, g.const(f"rs_{len(g.inits)}", [0, NH, -1, D])], p + f"/{attn}")
            kr, vr = rep(kh), rep(vh)
            scores = g.node("MatMul", [qh, g.node("Transpose", [kr], p + f"/{attn}", perm=[0, 1, 3, 2])], p + f"/{attn}")
            scores = g.node("Mul", [scores, g.const(f"scale_{l}", np.float32(D ** -0.5))], p + f"/{attn}")
            s_len = g.node("Gather", [g.node("Shape", ["input_ids"], p), g.const(f"one_{l}", 1)], p, axis=0)
            ar = g.node("Range", [g.const(f"z_{l}", 0), s_len, g.const(f"o_{l}", 1)], p)
            causal = g.node("LessOrEqual", [g.node("Unsqueeze", [ar, g.const(f"a0_{l}", [0])], p),
                                            g.node("Unsqueeze", [ar, g.const(f"a1_{l}", [1])], p)], p)
            keep = g.node("And", [causal, mask4], p)
            masked = g.node("Where", [keep, scores, g.const(f"neg_{l}", np.float32(-1e9))], p + f"/{attn}")
            probs = g.node("Softmax", [masked], p + f"/{attn}", axis=-1)
            o = g.node("MatMul", [probs, vr], p + f"/{attn}")
            o = g.node("Reshape", [g.node("Transpose", [o], p + f"/{attn}", perm=[0, 2, 1, 3]),
                                    g.const(f"flat_{l}", [0, 0, NH * D])], p + f"/{attn}")
        else:
            q = g.node("RotaryEmbedding", [q, "cos_cache", "sin_cache", pos], p + f"/{attn}/q_rotary", num_heads=NH)
            k = g.node("RotaryEmbedding", [k, "cos_cache", "sin_cache", pos], p + f"/{attn}/k_rotary", num_heads=KV)
            o = g.node("Attention", [q, k, v, full_mask], p + f"/{attn}", q_num_heads=NH, kv_num_heads=KV)
        o = linear(g, o, f"model.layers.{l}.{attn}.o_proj", NH * D, H, msft, bias)
        if msft:
            y, _, _, residual = g.node("SkipSimplifiedLayerNormalization",
                                       [residual, o, f"model.layers.{l}.post_attention_layernorm.weight"],
                                       p + "/post_attention_layernorm", domain="com.microsoft", outputs=4, epsilon=1e-6)
        else:
            residual = g.node("Add", [residual, o], p)
            y = g.node("RMSNormalization", [residual, f"model.layers.{l}.post_attention_layernorm.weight"],
                       p + "/post_attention_layernorm", axis=-1, epsilon=1e-6)
        gate = linear(g, y, f"model.layers.{l}.mlp.gate_proj", H, I, msft)
        up = linear(g, y, f"model.layers.{l}.mlp.up_proj", H, I, msft)
        act = g.node("Mul", [gate, g.node("Sigmoid", [gate], p + "/mlp/act_fn")], p + "/mlp/act_fn")
        down = linear(g, g.node("Mul", [act, up], p + "/mlp"), f"model.layers.{l}.mlp.down_proj", I, H, msft, bias)
        if msft:
            skip_pending = down
        else:
            residual = g.node("Add", [residual, down], p)
    g.init("model.norm.weight", 1 + w(H, scale=0.1))
    if msft:
        f, _, _, _ = g.node("SkipSimplifiedLayerNormalization", [residual, skip_pending, "model.norm.weight"],
                            "/model/norm", domain="com.microsoft", outputs=4, epsilon=1e-6)
    else:
        f = g.node("RMSNormalization", [residual, "model.norm.weight"], "/model/norm", axis=-1, epsilon=1e-6)
    lm_out = "logits" if softcap is None else "lm_head_out"
    g.nodes.append(helper.make_node("MatMul", [f, g.init("lm_head.MatMul.weight" if msft else "onnx::MatMul_lm", w(H, V))],
                                    [lm_out], name="/lm_head/MatMul"))
    if softcap is not None:
        # Gemma's final_logit_softcapping: cap * tanh(logits / cap).
        cap = g.init("softcap", np.array(softcap, np.float32))
        t = g.node("Tanh", [g.node("Div", [lm_out, cap], "")], "")
        g.nodes.append(helper.make_node("Mul", [t, cap], ["logits"], name="/softcap/Mul"))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])]
    if gqa:
        for l in range(L):
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_key_values.{l}.{kind}", TensorProto.FLOAT,
                                                            ["batch", KV, "past", D]))
        for name, value in presents:
            g.nodes.append(helper.make_node("Identity", [value], [name], name=f"/model/{name}/Identity"))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", KV, "total", D]))
    graph = helper.make_graph(g.nodes, "fused", inputs, outputs, initializer=g.inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)] if msft else [helper.make_opsetid("", 23)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    name = ("gqa.onnx" if gqa else "msft.onnx" if msft else "bias.onnx" if bias
            else "softcap.onnx" if softcap is not None else "opset23.onnx")
    save(model, os.path.join(out, name))


build(False)
build(True)
build(True, gqa=True)
build(False, bias=True)
build(False, softcap=2.0)
