#!/usr/bin/env python3
"""onnxruntime's single-core MatMul (its MLAS sgemm, which its CPU execution
provider runs for every projection of bench/forward) on the medium Llama's
projection shapes: eight products of one shape per graph, weights as
initializers (prepacked by onnxruntime), median of 20 runs. Prints a table
beside bench/gemm's.

    ort_matmul.py [--rows 128] [--hidden 512] [--kv 256] [--mlp 1408] [--vocab 4096]"""
import argparse
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=128)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--kv", type=int, default=256)
p.add_argument("--mlp", type=int, default=1408)
p.add_argument("--vocab", type=int, default=4096)
args = p.parse_args()
h = args.hidden
shapes = [("q_proj / o_proj", h, h), ("k_proj", h, args.kv), ("gate_proj", h, args.mlp),
          ("down_proj", args.mlp, h), ("lm_head", h, args.vocab)]


def gflops(m, k, n, count=8):
    rng = np.random.default_rng(0)
    nodes, inits, outs = [], [], []
    for i in range(count):
        inits.append(numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]))
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [m, n]))
    graph = helper.make_graph(nodes, "matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    session.run(None, feeds)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 2.0 * m * k * n * count / float(np.median(times)) / 1e9


print(f"onnxruntime {ort.__version__} MatMul (MLAS), 1 thread, {args.rows} rows, 8 products per run:")
print("| product | m x k x n | onnxruntime (GFLOPS) |")
print("|---|---|---|")
for name, k, n in shapes:
    print(f"| {name} | {args.rows} x {k} x {n} | {gflops(args.rows, k, n):.1f} |")
