#!/usr/bin/env python3
"""Copies a model.safetensors (F32 tensors), setting the first element of
one tensor to NaN: a checkpoint whose loss and gradients are not finite.

Usage: poison_checkpoint.py IN.safetensors OUT.safetensors TENSOR"""
import json
import struct
import sys

src, dst, name = sys.argv[1:]
with open(src, "rb") as f:
    size = int.from_bytes(f.read(8), "little")
    header_bytes = f.read(size)
    data = bytearray(f.read())
header = json.loads(header_bytes)
begin, _ = header[name]["data_offsets"]
data[begin:begin + 4] = struct.pack("<f", float("nan"))
with open(dst, "wb") as f:
    f.write(size.to_bytes(8, "little"))
    f.write(header_bytes)
    f.write(data)
