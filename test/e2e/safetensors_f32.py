"""Reads the tensors of a .safetensors file (F32, and F16 and BF16 widened
exactly to float32) by hand (the test venv
has numpy, not the safetensors package): shared by compare_training.py and
compare_checkpoints.py."""
import json
import os
import sys

import numpy as np


def read_safetensors(path):
    """name -> float32 array; a dtype other than F32, F16 and BF16 stops
    the test, naming it.
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
        begin, end = entry["data_offsets"]
        raw = data[begin:end]
        if entry["dtype"] == "F32":
            values = np.frombuffer(raw, dtype=np.float32)
        elif entry["dtype"] == "F16":
            values = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        elif entry["dtype"] == "BF16":  # widened exactly: the high 16 bits
            values = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32)
                      << 16).view(np.float32)
        else:
            sys.exit(f"FAIL: {path}: {name} is {entry['dtype']}")
        out[name] = values.reshape(entry["shape"])
    return out
