#!/usr/bin/env python3
"""bench/memory: peak resident memory per rank and step time of the
0.5 B Qwen2.5-shaped model's training (2 AdamW steps, micro-batch 1 of 32
tokens per data-parallel rank, 1 thread per rank) at dp=2 x tp=1 and
dp=2 x tp=2: the tpc programs with --zero 0, 1, 2 and 3 against PyTorch
FSDP2 (fully_shard per decoder layer, + DTensor TP on the decoder layers'
projections; torch_fsdp.py) on the same model, data and rows, one after
the other in one run.

    run.py WORK [--steps S] [--tp 1 --tp 2]   (WORK as run.sh leaves it)

Prints a Markdown table: per configuration the largest rank's peak RSS
(both sides include reading the weights), what the plan report predicts
the program holds besides activations, the last step's time, the ratios
the issue names, and the step-1 losses of both sides."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

p = argparse.ArgumentParser()
p.add_argument("work")
p.add_argument("--steps", type=int, default=2)
p.add_argument("--tp", type=int, action="append",
               help="only these grids' tp (default: 1 and 2)")
args = p.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
model = os.path.join(args.work, "model")
data = os.path.join(model, "tokens.npy")
DP, B, SEQ = 2, 1, 32


def ours(tp, zero):
    exe = os.path.join(args.work, f"exe_tp{tp}_zero{zero}", "model")
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "train.jsonl")
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(DP * tp), exe, "--train", "--data", data, "--weights",
               model, "--steps", str(args.steps), "--micro-batch", str(B),
               "--threads", "1", "--log", log]
        out = subprocess.run(cmd, capture_output=True, text=True,
                             check=True).stdout
        steps = [json.loads(line) for line in open(log)]
    held = int(re.search(r"total ([0-9]+) bytes", out).group(1))
    predicted = int(re.search(r"activation arenas [0-9]+ = ([0-9]+) bytes",
                              out).group(1))
    return {"rss": float(re.search(r"peak RSS ([0-9.]+) MiB", out).group(1)),
            "held": held / 2**20, "predicted": predicted / 2**20,
            "seconds": DP * B * SEQ / steps[-1]["tokens_per_s"],
            "loss": steps[0]["loss"]}


def peer(tp):
    cmd = [sys.executable, os.path.join(here, "torch_fsdp.py"), model, data,
           "--dp", str(DP), "--tp", str(tp), "--steps", str(args.steps),
           "--micro-batch", str(B)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"PyTorch peer at tp={tp} failed: "
              f"{out.stderr.strip().splitlines()[-1]}", file=sys.stderr)
        return None
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"rss": max(r["peak_rss_mib"]), "seconds": r["seconds"][-1],
            "loss": r["losses"][0]}


print(f"bench/memory: 0.5 B Qwen2.5-shaped model (494 M parameters, f32), "
      f"{args.steps} AdamW steps of micro-batch {B} x {SEQ} tokens per "
      f"data-parallel rank, 1 thread per rank")
print("| grid | program | peak RSS per rank (MiB) | held besides activations, "
      "plan report (MiB) | predicted with the activation arenas (MiB) | "
      "peak / predicted | last step (s) | step-1 loss |")
print("|---|---|---|---|---|---|---|---|")
ratios = []
for tp in args.tp or (1, 2):
    z0, z1, z2, z3 = (ours(tp, zero) for zero in range(4))
    fsdp = peer(tp)
    grid = f"dp=2 x tp={tp}"
    for name, r in (("tpc --zero 0", z0), ("tpc --zero 1", z1),
                    ("tpc --zero 2", z2), ("tpc --zero 3", z3),
                    ("PyTorch FSDP2" + (" + TP" if tp > 1 else ""), fsdp)):
        if r is None:
            print(f"| {grid} | {name} | failed (see stderr) | - | - | - | - "
                  "| - |")
            continue
        held = f"{r['held']:.0f}" if "held" in r else "-"
        predicted, ratio = "-", "-"
        if "predicted" in r:
            predicted = f"{r['predicted']:.0f}"
            ratio = f"{r['rss'] / r['predicted']:.3f}"
        print(f"| {grid} | {name} | {r['rss']:.0f} | {held} | {predicted} | "
              f"{ratio} | {r['seconds']:.2f} | {r['loss']:.6f} |")
    for stage, z in ((1, z1), (2, z2), (3, z3)):
        ratios.append((grid, stage, z["rss"] / z0["rss"],
                       z["rss"] / fsdp["rss"] if fsdp else float("nan"),
                       z["seconds"] / fsdp["seconds"] if fsdp
                       else float("nan")))
print()
print("| grid | stage | peak RSS / --zero 0 | peak RSS / FSDP2 | "
      "step time / FSDP2 |")
print("|---|---|---|---|---|")
def ratio(x):
    return "-" if x != x else f"{x:.2f}"  # NaN: the peer failed


for grid, stage, a, b, c in ratios:
    print(f"| {grid} | --zero {stage} | {ratio(a)} | {ratio(b)} | "
          f"{ratio(c)} |")
