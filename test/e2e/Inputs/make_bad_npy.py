"""Writes malformed .npy files for test/e2e/npy-errors.test: each one a way a
crafted or damaged input file could make the runtime allocate, read or
write out of bounds if its header were trusted."""
import struct
import sys
from pathlib import Path


def npy(header: str, data: bytes = b"", version: int = 1, header_len=None) -> bytes:
    text = header.encode()
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    length = len(text) if header_len is None else header_len
    if version == 1:
        prefix = b"\x93NUMPY\x01\x00" + struct.pack("<H", length)
    else:
        prefix = b"\x93NUMPY\x02\x00" + struct.pack("<I", length)
    return prefix + text + data


out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
files = {
    # 2^32 x 2^32 int64 elements claimed (the byte count wraps), no data.
    "huge.npy": npy("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
    # One dimension of 2^62.
    "bigdim.npy": npy("{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"),
    # A shape that is not a tuple of integers.
    "badshape.npy": npy("{'descr': '<i8', 'fortran_order': False, 'shape': ('a',), }"),
    # A header length of 4 GiB in a 22-byte file.
    "hdrlen.npy": (b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF) + b"\x00" * 10),
    # 1 x 5 int64 claimed, one element stored.
    "trunc.npy": npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 5), }", b"\x01" + b"\x00" * 7),
    "f64.npy": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }", b"\x00" * 8),
    "fortran.npy": npy("{'descr': '<i8', 'fortran_order': True, 'shape': (1, 1), }", b"\x00" * 8),
    "garbage.npy": b"PK\x03\x04 not an array at all",
}
for name, data in files.items():
    (out / name).write_bytes(data)
