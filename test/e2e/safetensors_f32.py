"""Reads the F32 tensors of a .safetensors file by hand (the test venv
has numpy, not the safetensors package): shared by compare_training.py and
compare_checkpoints.py."""
import json
import os
import sys

import numpy as np


def read_safetensors(path):
    """name -> float32 array; another dtype stops the test, naming it.
    `path` may also be a checkpoint directory (`--save DIR`: its
    model.safetensors.index.json's shards, or its model.safetensors) or
    an index."""
    if os.path.isdir(path):
        index = os.path.join(path, "model.safetensors.index.json")
        path = index if os.path.exists(index) else os.path.join(
            path, "model.safetensors")
    if path.endswith(".json"):
        with open(path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for name in files:
            out.update(read_safetensors(
                os.path.join(os.path.dirname(path), name)))
        return out
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            sys.exit(f"FAIL: {path}: {name} is {entry['dtype']}")
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(
            entry["shape"])
    return out
