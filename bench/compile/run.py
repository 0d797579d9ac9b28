#!/usr/bin/env python3
"""bench/compile: the whole tpc pipeline (import, raising, checks, plan and
partition at --tp > 1, lowering to EmitC, C++ emission; --emit cpp) on
Llama-3-70B-shaped graphs of 8, 32 and 80 layers whose weights sit in a
sparse external-data file. --form dynamo: transformers' LlamaForCausalLM
through the dynamo exporter (export_dynamo.py, needs setup.sh --models);
--form fused: opset-23 fused operators (make_graph.py). --emit exe adds the
host C++ compiler and the link to the executable (the RSS is then the
largest of tpc and its compiler); --train compiles the training program
(forward, training step, optimizer step, init). Reports wall time and peak RSS of each
(median of REPEAT runs, RSS from wait4), the 80/8 time ratio, and the
targets: 80 layers under 5 s and 1 GiB, ratio under 12.

Usage: run.py TPC WORKDIR [--form dynamo|fused] [--emit cpp|exe] [--train] [--repeat N] [--tp N]"""
import argparse
import os
import statistics
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("tpc")
p.add_argument("work")
p.add_argument("--repeat", type=int, default=3)
p.add_argument("--tp", type=int, default=1)
p.add_argument("--layers", default="8,32,80")
p.add_argument("--form", choices=["dynamo", "fused"], default="dynamo")
p.add_argument("--emit", choices=["cpp", "exe"], default="cpp")
p.add_argument("--train", action="store_true")
args = p.parse_args()
here = os.path.dirname(os.path.abspath(__file__))

rows = {}
for layers in [int(x) for x in args.layers.split(",")]:
    model_dir = os.path.join(args.work, f"{args.form}_l{layers}")
    maker = "export_dynamo.py" if args.form == "dynamo" else "make_graph.py"
    if not os.path.exists(os.path.join(model_dir, "model.onnx")):
        subprocess.run([sys.executable, os.path.join(here, maker), model_dir, str(layers)], check=True,
                       stdout=subprocess.DEVNULL)
    walls, rsss = [], []
    for _ in range(args.repeat):
        out = os.path.join(model_dir, "out")
        cmd = [args.tpc, os.path.join(model_dir, "model.onnx"), "--emit", args.emit, "--tp", str(args.tp), "-o", out]
        if args.train:
            cmd.append("--train")
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        walls.append(time.perf_counter() - start)
        rsss.append(usage.ru_maxrss / 1024.0)  # KiB -> MiB
        if status != 0:
            sys.exit(f"tpc failed on {layers} layers: {' '.join(cmd)}")
    with open(os.path.join(out, "model.cpp")) as f:
        lines = sum(1 for _ in f)
    rows[layers] = (statistics.median(walls), max(rsss), lines)

program = "training" if args.train else "forward"
print(f"| form | program | emit | layers | tp | wall (s, median of {args.repeat}) | peak RSS (MiB) | model.cpp lines |")
print("|---|---|---|---|---|---|---|---|")
for layers, (wall, rss, lines) in rows.items():
    print(f"| {args.form} | {program} | {args.emit} | {layers} | {args.tp} | {wall:.3f} | {rss:.1f} | {lines} |")
if 8 in rows and 80 in rows:
    ratio = rows[80][0] / rows[8][0]
    wall, rss, _ = rows[80]
    print(f"80/8 time ratio: {ratio:.2f} (target < 12); 80 layers: {wall:.2f} s (target < 5), "
          f"{rss:.0f} MiB (target < 1024)")
    ok = ratio < 12 and wall < 5 and rss < 1024
    print("targets met" if ok else "TARGETS MISSED")
    sys.exit(0 if ok else 1)
