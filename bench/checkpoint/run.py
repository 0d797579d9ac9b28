#!/usr/bin/env python3
"""bench/checkpoint: saving and loading the weights and AdamW state of the
0.5 B Qwen2.5-shaped model at tp=1 and tp=2, tp-opt against
safetensors.torch.save_file / load_file and torch.distributed.checkpoint on
the same per-rank tensors (peers.py), in one run.

  ours, save   `model --train --steps 1 --save DIR` (every rank writes its
               blocks into HF's sharded layout); the program's own line:
               the slowest rank's seconds and each rank's resident memory
               added during the save
  ours, load   `model --train --steps 1 --resume DIR --report-reads`: each
               rank's reads of its blocks of the weights and moments
  peers        the same tensors, each rank its blocks (peers.py)

Rounds alternate ours and the peers (--rounds, default 3), each timed
operation after `sync` (no save pays for an earlier one's writeback);
medians are reported. Prints a table (seconds, ratio ours / peer: <= 1.0
means no slower) and the check that rank 0's memory added during --save is
at most 10% of its own parameters (the largest over the rounds).

    run.py MODEL_DIR GRAPH_EXE_TP1 GRAPH_EXE_TP2 WORK_DIR [--rounds R]"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("exe1")
p.add_argument("exe2")
p.add_argument("work")
p.add_argument("--rounds", type=int, default=3)
args = p.parse_args()
model, exe1, exe2, work = args.model, args.exe1, args.exe2, args.work
tokens = os.path.join(model, "tokens.npy")


def ours(exe, ranks):
    save = os.path.join(work, f"ours_tp{ranks}")
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
              str(ranks)] if ranks > 1 else []
    base = mpirun + [exe, "--train", "--data", tokens, "--steps", "1",
                     "--micro-batch", "1"]
    os.sync()
    out = subprocess.run(base + ["--save", save], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"saved '.*': ([0-9.]+) MiB in ([0-9.]+) s; resident "
                  r"memory added during the save: (.*)", out)
    added = [(float(a), float(p)) for a, p in re.findall(
        r"rank \d+ \+([0-9.]+) MiB \(parameters ([0-9.]+)\)", m.group(3))]
    os.sync()
    out = subprocess.run(base + ["--resume", save, "--report-reads"],
                         check=True, capture_output=True, text=True).stdout
    reads = [float(s) for s in re.findall(
        r"rank \d+ ([0-9.]+) s", re.search(r"parameter reads took:(.*)",
                                           out).group(1))]
    return {"save_s": float(m.group(2)), "load_s": max(reads),
            "mib": float(m.group(1)), "added": added}, save


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


rows = []
for ranks, exe in ((1, exe1), (2, exe2)):
    mine_runs, peer_runs = [], {"safetensors": [], "dcp": []}
    for _ in range(args.rounds):
        mine, save = ours(exe, ranks)
        mine_runs.append(mine)
        os.sync()
        out = subprocess.run(
            [sys.executable, os.path.join(here, "peers.py"), save,
             os.path.join(work, f"peers_tp{ranks}"), str(ranks)],
            check=True, capture_output=True, text=True).stdout
        for r in map(json.loads, out.strip().splitlines()):
            peer_runs[r["peer"]].append(r)
    mine = {"save_s": median_of(mine_runs, "save_s"),
            "load_s": median_of(mine_runs, "load_s"),
            "mib": mine_runs[0]["mib"],
            "added": [(max(run["added"][r][0] for run in mine_runs),
                       mine_runs[0]["added"][r][1])
                      for r in range(ranks)]}
    peers = {name: {"save_s": median_of(runs, "save_s"),
                    "load_s": median_of(runs, "load_s"),
                    "added_mib": [max(run["added_mib"][r] for run in runs)
                                  for r in range(ranks)]}
             for name, runs in peer_runs.items()}
    rows.append((ranks, mine, peers))

print("| tp | checkpoint | ours save s | save_file s | dcp.save s | ratio vs "
      "save_file | ratio vs dcp | ours load s | load_file s | dcp.load s | "
      "ratio vs load_file | ratio vs dcp |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for ranks, mine, peers in rows:
    st, dc = peers["safetensors"], peers["dcp"]
    print(f"| {ranks} | {mine['mib']:.0f} MiB | {mine['save_s']:.2f} | "
          f"{st['save_s']:.2f} | {dc['save_s']:.2f} | "
          f"{mine['save_s'] / st['save_s']:.2f} | "
          f"{mine['save_s'] / dc['save_s']:.2f} | {mine['load_s']:.2f} | "
          f"{st['load_s']:.2f} | {dc['load_s']:.2f} | "
          f"{mine['load_s'] / st['load_s']:.2f} | "
          f"{mine['load_s'] / dc['load_s']:.2f} |")
print()
print("| tp | rank | parameters MiB | added during save: ours | save_file | "
      "dcp.save |")
print("|---|---|---|---|---|---|")
ok = True
for ranks, mine, peers in rows:
    for r, (added, params) in enumerate(mine["added"]):
        print(f"| {ranks} | {r} | {params:.0f} | {added:.1f} | "
              f"{peers['safetensors']['added_mib'][r]:.1f} | "
              f"{peers['dcp']['added_mib'][r]:.1f} |")
        if r == 0 and added > 0.1 * params:
            ok = False
print()
print("rank 0 adds at most 10% of its parameters during --save: "
      + ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
