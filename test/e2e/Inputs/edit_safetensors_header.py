#!/usr/bin/env python3
"""Rewrites one tensor's entry in a safetensors file's header (same data
bytes): the broken checkpoints of the tests.

    edit_safetensors_header.py FILE TENSOR KEY JSON_VALUE

e.g. `... optimizer-00001-of-00001.safetensors model.norm.weight.exp_avg
shape [8,8]`."""
import json
import sys

path, name, key, value = sys.argv[1:]
with open(path, "rb") as f:
    size = int.from_bytes(f.read(8), "little")
    header = json.loads(f.read(size))
    data = f.read()
header[name][key] = json.loads(value)
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
with open(path, "wb") as f:
    f.write(len(text).to_bytes(8, "little"))
    f.write(text)
    f.write(data)
