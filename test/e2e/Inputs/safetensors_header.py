#!/usr/bin/env python3
"""Prints a safetensors file's tensors, one line each: NAME DTYPE [SHAPE],
in the header's order (the tests' view of a binary file).

    safetensors_header.py FILE"""
import json
import sys

with open(sys.argv[1], "rb") as f:
    size = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(size))
for name, entry in header.items():
    if name != "__metadata__":
        print(f"{name} {entry['dtype']} "
              f"[{', '.join(str(d) for d in entry['shape'])}]")
