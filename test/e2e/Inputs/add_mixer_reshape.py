#!/usr/bin/env python3
"""Adds to a TorchScript export's first Mamba mixer a reshape of B (the
second output of the mixer's second Split) to [..., G, N], which nothing
reads: a second pair that fits n_groups x state_size.

    add_mixer_reshape.py IN.onnx OUT.onnx G N"""
import sys

import onnx
from onnx import helper, numpy_helper
import numpy as np

src, out, g, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = onnx.load(src)
nodes = list(m.graph.node)
at = next(i for i, x in enumerate(nodes) if x.name == "/model/layers.0/mixer/Split_1")
b = nodes[at].output[1]
scope = "/model/layers.0/mixer/"
extra = [
    helper.make_node("Constant", [], ["extra_keep"], name=scope + "Constant_extra0",
                     value=numpy_helper.from_array(np.array([0, 0], np.int64))),
    helper.make_node("Constant", [], ["extra_pair"], name=scope + "Constant_extra1",
                     value=numpy_helper.from_array(np.array([g, n], np.int64))),
    helper.make_node("Concat", ["extra_keep", "extra_pair"], ["extra_shape"],
                     name=scope + "Concat_extra", axis=0),
    helper.make_node("Reshape", [b, "extra_shape"], ["extra_view"],
                     name=scope + "Reshape_extra"),
]
del m.graph.node[:]
m.graph.node.extend(nodes[:at + 1] + extra + nodes[at + 1:])
onnx.save(m, out)
