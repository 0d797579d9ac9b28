#!/usr/bin/env python3
"""Reads a partitioned training program (the model.mlir tpc writes) and
checks that no replicated parameter's gradient is reduced twice: each
tp.accumulate_grad with a replica class (reduction = mean | sum) adds a
value that no shard.all_reduce produced, and each of those parameters is
in exactly one tp.grad_bucket_all_reduce of @optimizer_step.

Prints the counts (replicated gradients, per class; buckets); exits
non-zero naming the first violation.

Usage: check_grad_sync.py model.mlir"""
import re
import sys

text = open(sys.argv[1]).read()
reduced = set(re.findall(r"(%[\w.#]+) = shard\.all_reduce", text))
classes = {}
for value, fqn, cls in re.findall(
        r"tp\.accumulate_grad (%[\w.#]+) into %[\w.#]+ \{[^}]*"
        r"fqn = \"([^\"]+)\"[^}]*reduction = #tp\.grad_reduction<(\w+)>",
        text):
    if value in reduced:
        sys.exit(f"FAIL: the gradient of '{fqn}' is all-reduced before the "
                 f"optimizer boundary and again in its bucket")
    classes[fqn] = cls
bucketed = []
for fqns in re.findall(r"tp\.grad_bucket_all_reduce \{[^}]*fqns = \[([^]]*)\]",
                       text):
    bucketed += re.findall(r"\"([^\"]+)\"", fqns)
for fqn in classes:
    if bucketed.count(fqn) != 1:
        sys.exit(f"FAIL: '{fqn}' is in {bucketed.count(fqn)} buckets")
if sorted(bucketed) != sorted(classes):
    sys.exit(f"FAIL: buckets hold gradients without a replica class: "
             f"{sorted(set(bucketed) - set(classes))}")
counts = {c: list(classes.values()).count(c) for c in ("mean", "sum")}
print(f"ok: {len(classes)} replicated gradients ({counts['mean']} mean, "
      f"{counts['sum']} sum), none reduced before the boundary; "
      f"{text.count('tp.grad_bucket_all_reduce')} buckets")
