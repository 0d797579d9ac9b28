"""The plan report's activation arenas against a training run's accounting.

The run's "memory predicted" line must hold the report's training-step
arena (bytes per token) times the tokens of a micro-batch (micro-batch x
the data's sequence length), and the held memory plus that. Prints one
"ok:" line, or the first difference and exits 1.
"""
import argparse
import re
import sys

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("report", help="plan-report.md of the program")
p.add_argument("run", help="what the training run printed")
p.add_argument("--data", required=True, help="the --data .npy of the run")
p.add_argument("--micro-batch", type=int, default=1)
args = p.parse_args()

report = open(args.report).read()
run = open(args.run).read()
per_token = re.search(r"^\| train_step \| ([0-9]+) \|$", report, re.M)
predicted = re.search(r"memory predicted for rank 0: held ([0-9]+) \+ "
                      r"activation arenas ([0-9]+) = ([0-9]+) bytes", run)
if not per_token or not predicted:
    sys.exit("no train_step arena in the report, or no prediction in the run")
held, arenas, total = (int(g) for g in predicted.groups())
tokens = args.micro_batch * np.load(args.data, mmap_mode="r").shape[1]
want = int(per_token.group(1)) * tokens
if arenas != want:
    sys.exit(f"the run's arenas are {arenas} bytes; the report's "
             f"{per_token.group(1)} bytes per token x {tokens} tokens "
             f"are {want}")
if total != held + arenas:
    sys.exit(f"the prediction {total} is not held {held} + arenas {arenas}")
print(f"ok: activation arenas {arenas} bytes = {per_token.group(1)} bytes "
      f"per token x {tokens} tokens")
