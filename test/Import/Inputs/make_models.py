#!/usr/bin/env python3
"""Writes small ONNX models, valid and deliberately broken, for the importer's
lit tests. Usage: make_models.py OUTDIR. Each case is one file (plus its
external data) named after the defect it has."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def model(nodes, inits, inputs=None, outputs=None, name="g"):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])]
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def save(m, name):
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


def external(tensor, location, offset=0, length=None):
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = tensor.external_data.add()
        e.key, e.value = k, v
    tensor.ClearField("raw_data")
    return tensor


w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
matmul = [helper.make_node("MatMul", ["x", "w"], ["y"], name="/model/proj/MatMul")]

# A valid model with external data at a page-aligned offset.
data = np.arange(16, dtype=np.float32).tobytes()
with open(os.path.join(out, "ok.bin"), "wb") as f:
    f.write(b"\0" * 4096 + data)
save(model(matmul, [external(onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4]), "ok.bin", 4096, 64)]), "external_ok.onnx")

# External-data defects.
def ext_case(name, location, offset=0, length=64):
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4])
    save(model(matmul, [external(t, location, offset, length)]), name)

ext_case("external_absolute.onnx", "/etc/passwd")
ext_case("external_dotdot.onnx", "sub/../../outside.bin")
ext_case("external_missing.onnx", "nothere.bin")
ext_case("external_truncated.onnx", "ok.bin", 4096 + 32, 64)
ext_case("external_offset_past_end.onnx", "ok.bin", 1 << 20, 64)
ext_case("external_wrong_length.onnx", "ok.bin", 4096, 32)
os.makedirs(os.path.join(out, "..", "outside"), exist_ok=True)
with open(os.path.join(out, "..", "outside", "secret.bin"), "wb") as f:
    f.write(data)
link = os.path.join(out, "escape.bin")
if os.path.lexists(link):
    os.remove(link)
os.symlink(os.path.join("..", "outside", "secret.bin"), link)
ext_case("external_symlink_escape.onnx", "escape.bin", 0, 64)
t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4])
t.data_location = TensorProto.EXTERNAL
save(model(matmul, [t]), "external_no_location.onnx")

# Tensor and graph defects.
bad = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
bad.raw_data = bad.raw_data[:40]
save(model(matmul, [bad]), "raw_data_short.onnx")

neg = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, -4])
save(model(matmul, [neg]), "negative_dim.onnx")

huge = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 1 << 40])
save(model(matmul, [huge]), "overflow_dims.onnx")

save(model([helper.make_node("MatMul", ["x", "w_missing"], ["y"], name="/model/proj/MatMul")], []), "missing_initializer.onnx")

cycle = [
    helper.make_node("Add", ["x", "b"], ["a"], name="/model/add_a"),
    helper.make_node("Relu", ["a"], ["b"], name="/model/relu_b"),
    helper.make_node("Identity", ["a"], ["y"], name="/model/out"),
]
save(model(cycle, []), "cycle.onnx")

save(model(matmul + [helper.make_node("Relu", ["y"], ["y"], name="/model/again")], [w]), "defined_twice.onnx")

with open(os.path.join(out, "malformed.onnx"), "wb") as f:
    good = model(matmul, [w]).SerializeToString()
    f.write(good[: len(good) // 2])

with open(os.path.join(out, "not_onnx.onnx"), "wb") as f:
    f.write(b"this is not a protobuf file at all\n")

# Activation defects for the raiser: an op it has no building block for,
# and a graph input it does not support.
ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
emb = numpy_helper.from_array(np.ones((8, 4), np.float32), "model.embed_tokens.weight")
lm = numpy_helper.from_array(np.ones((4, 8), np.float32), "lm_head.weight")
nodes = [
    helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="/model/embed_tokens/Gather"),
    helper.make_node("Celu", ["h"], ["c"], name="/model/layers.0/act/Celu"),
    helper.make_node("MatMul", ["c", "lm_head.weight"], ["logits"], name="/lm_head/MatMul"),
]
logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 8])
save(model(nodes, [emb, lm], [ids], [logits]), "unsupported_op.onnx")

past = helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, ["batch", "past", 2])
nodes = [
    helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="/model/embed_tokens/Gather"),
    helper.make_node("MatMul", ["h", "lm_head.weight"], ["logits"], name="/lm_head/MatMul"),
]
save(model(nodes, [emb, lm], [ids, past], [logits]), "kv_cache_input.onnx")
types = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"])
save(model(nodes, [emb, lm], [ids, types], [logits]), "unknown_input.onnx")

# The smallest raisable model: embedding and lm_head, FQN-named weights.
lm_t = numpy_helper.from_array(np.ones((8, 4), np.float32), "lm_head.weight")
nodes = [
    helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="node_Gather_0"),
    helper.make_node("Transpose", ["lm_head.weight"], ["lmT"], name="node_Transpose_1", perm=[1, 0]),
    helper.make_node("MatMul", ["h", "lmT"], ["logits"], name="node_MatMul_2"),
]
save(model(nodes, [emb, lm_t], [ids], [logits]), "tiny_lm.onnx")

# The same with anonymous, pre-transposed weights and no scopes: unnamable.
anon = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(4, 8), "onnx::MatMul_7")
nodes = [
    helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="node_Gather_0"),
    helper.make_node("MatMul", ["h", "onnx::MatMul_7"], ["logits"], name="node_MatMul_2"),
]
save(model(nodes, [emb, anon], [ids], [logits]), "unnamed_weight.onnx")

# A folded tied lm_head: an anonymous initializer equal to the embedding's
# transpose, byte for byte, must become the embedding parameter again.
emb_r = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4) / 7, "model.embed_tokens.weight")
copy = numpy_helper.from_array((np.arange(32, dtype=np.float32).reshape(8, 4) / 7).T.copy(), "onnx::MatMul_9")
near = (np.arange(32, dtype=np.float32).reshape(8, 4) / 7).T.copy()
near[3, 5] += 1.0
near_t = numpy_helper.from_array(near, "onnx::MatMul_9")
for name, lm_init in [("tied_folded.onnx", copy), ("almost_tied_folded.onnx", near_t)]:
    nodes = [
        helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="/model/embed_tokens/Gather"),
        helper.make_node("MatMul", ["h", "onnx::MatMul_9"], ["logits"], name="/lm_head/MatMul"),
    ]
    save(model(nodes, [emb_r, lm_init], [ids], [logits]), name)

# An initializer and a graph input of rank 100 000 (all unit dimensions).
deep = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1] * 100000)
deep.raw_data = np.zeros(1, dtype=np.float32).tobytes()
save(model(matmul, [deep]), "huge_rank_initializer.onnx")
save(model(matmul, [w], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1] * 100000)]),
     "huge_rank_input.onnx")

# A named empty matrix and an anonymous one of the transposed shape: the
# transposed-copy detection has no element to sample (it divided by zero).
empty = numpy_helper.from_array(np.zeros((0, 4), dtype=np.float32), "a.weight")
empty_t = numpy_helper.from_array(np.zeros((4, 0), dtype=np.float32), "onnx::MatMul_9")
save(model(matmul, [w, empty, empty_t]), "zero_dim_transposed.onnx")

# A "MatMul" of a custom domain is not the standard MatMul.
nodes = [
    helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["h"], name="/model/embed_tokens/Gather"),
    helper.make_node("MatMul", ["h", "lm_head.weight"], ["logits"], name="/lm_head/MatMul", domain="my.custom"),
]
m = model(nodes, [emb, lm], [ids], [logits])
m.opset_import.append(helper.make_opsetid("my.custom", 1))
save(m, "custom_domain.onnx")

# A graph-valued attribute (the kind number, not a raw character, in the
# message).
sub = helper.make_graph([], "sub", [], [])
node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/model/proj/MatMul")
node.attribute.append(helper.make_attribute("body", sub))
save(model([node], [w]), "graph_attribute.onnx")

# A Constant node whose tensor has an unsupported data type (complex64).
bad_const = onnx.TensorProto(data_type=TensorProto.COMPLEX64, dims=[1])
bad_const.raw_data = b"\x00" * 8
node = helper.make_node("Constant", [], ["c"], name="/model/const/Constant", value=bad_const)
save(model([node] + matmul, [w]), "constant_bad_type.onnx")

# A node whose own bytes are malformed (a string field whose length runs
# past the node): the graph walk sees whole fields; the node does not parse.
good = model(matmul, [w])
raw = bytearray(good.SerializeToString())
name = b"/model/proj/MatMul"
i = raw.index(name)
raw[i - 1] = 0x7F  # the name's length byte: 127, past the end of the node
open(os.path.join(out, "malformed_node.onnx"), "wb").write(bytes(raw))
