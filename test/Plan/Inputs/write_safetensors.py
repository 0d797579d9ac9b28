#!/usr/bin/env python3
"""Writes a safetensors file for the tests: write_safetensors.py OUT
NAME=D0xD1[:DTYPE] ... (float32 values 0, 1, 2, ...; DTYPE F32 or F16),
or OUT --raw TEXT to write TEXT after a header length that overstates it."""
import json
import struct
import sys

import numpy as np

out, specs = sys.argv[1], sys.argv[2:]
if specs and specs[0] == "--raw":
    body = specs[1].encode()
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(body) + 100) + body)
    sys.exit(0)
header, blobs, offset = {}, [], 0
for spec in specs:
    name, _, rest = spec.partition("=")
    shape_text, _, dtype = rest.partition(":")
    dtype = dtype or "F32"
    shape = [int(d) for d in shape_text.split("x")]
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    blob = (data if dtype == "F32" else data.astype(np.float16)).tobytes()
    header[name] = {"dtype": dtype, "shape": shape,
                    "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
text = json.dumps(header).encode()
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
