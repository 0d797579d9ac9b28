"""Reads the F32 tensors of a .safetensors file by hand (the test venv
has numpy, not the safetensors package): shared by compare_training.py and
compare_checkpoints.py."""
import json
import sys

import numpy as np


def read_safetensors(path):
    """name -> float32 array; another dtype stops the test, naming it."""
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
