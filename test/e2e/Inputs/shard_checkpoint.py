#!/usr/bin/env python3
"""Writes a checkpoint as transformers shards a large one: OUT/model-0000k-
of-0000n.safetensors and OUT/model.safetensors.index.json (its weight_map
naming each tensor's shard), from the float32 tensors of one safetensors
file, in their order, about equal bytes per shard.

    shard_checkpoint.py SRC.safetensors OUT N [--dtype f32|bf16|f16]
        [--drop NAME] [--break missing-file|missing-tensor]

--dtype stores the tensors in that type (bf16 rounded to nearest even);
--drop leaves a tensor out of the checkpoint (a tied lm_head);
--break writes an index that names a shard file that is not there, or a
tensor its shard does not hold, or stores model.norm.weight with one
element fewer (the errors' tests)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from safetensors_f32 import read_safetensors  # noqa: E402


def stored(array, dtype):
    if dtype == "f32":
        return "F32", array.astype(np.float32).tobytes()
    if dtype == "f16":
        return "F16", array.astype(np.float16).tobytes()
    bits = array.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "BF16", rounded.astype(np.uint16).tobytes()


def write_shard(path, tensors, dtype):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors:
        code, blob = stored(array, dtype)
        header[name] = {"dtype": code, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("shards", type=int)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    p.add_argument("--drop", action="append", default=[])
    p.add_argument("--break", dest="breakage",
                   choices=["missing-file", "missing-tensor", "wrong-shape"])
    args = p.parse_args()
    tensors = [(k, v) for k, v in read_safetensors(args.src).items()
               if k not in args.drop]
    if args.breakage == "wrong-shape":
        tensors = [(k, v[:-1] if k == "model.norm.weight" else v)
                   for k, v in tensors]
    total = sum(v.nbytes for _, v in tensors)
    os.makedirs(args.out, exist_ok=True)
    groups, current, size = [], [], 0
    for item in tensors:
        current.append(item)
        size += item[1].nbytes
        if size >= total / args.shards and len(groups) < args.shards - 1:
            groups.append(current)
            current, size = [], 0
    groups.append(current)
    n = len(groups)
    weight_map = {}
    for k, group in enumerate(groups, 1):
        name = f"model-{k:05d}-of-{n:05d}.safetensors"
        write_shard(os.path.join(args.out, name), group, args.dtype)
        for tensor, _ in group:
            weight_map[tensor] = name
    if args.breakage == "missing-file":
        first = next(iter(weight_map))
        weight_map[first] = f"model-{n + 1:05d}-of-{n:05d}.safetensors"
    elif args.breakage == "missing-tensor":
        weight_map["model.not_in_any_shard.weight"] = next(
            iter(weight_map.values()))
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total, "format": {"nested": [1, 2]}},
                   "weight_map": weight_map}, f, indent=2)
    print(f"{n} shards, {total} bytes")


if __name__ == "__main__":
    main()
