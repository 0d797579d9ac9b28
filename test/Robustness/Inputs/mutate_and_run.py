"""Runs a tool on deterministic mutations of an input file and checks that
each one either succeeds or fails cleanly: exit status 1 with a diagnostic
("error:"), never a crash, a sanitizer report, a hang or an exit without a
message. Prints one summary line for FileCheck.

usage: mutate_and_run.py INPUT WORKDIR COUNT -- TOOL ARGS... (@FILE@ is the
mutated file)
"""
import random
import subprocess
import sys
from pathlib import Path

src, work, count = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
sep = sys.argv.index("--")
command = sys.argv[sep + 1:]
data = src.read_bytes()
work.mkdir(parents=True, exist_ok=True)
rng = random.Random(20261130)


def mutations():
    # Truncations at spread points, then bit flips, byte runs and splices.
    for k in range(1, 9):
        yield "truncated", data[: len(data) * k // 9]
    while True:
        kind = rng.choice(["flip", "bytes", "splice", "zero"])
        b = bytearray(data)
        if kind == "flip":
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif kind == "bytes":
            i = rng.randrange(len(b))
            for j in range(i, min(len(b), i + rng.randint(1, 16))):
                b[j] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif kind == "splice":
            i, j = sorted(rng.sample(range(len(b)), 2))
            b = b[:i] + b[j:] + b[i:j]
        else:
            i = rng.randrange(len(b))
            b[i : i + 8] = b"\x00" * min(8, len(b) - i)
        yield kind, bytes(b)


ok = rejected = 0
bad = []
for n, (kind, blob) in zip(range(count), mutations()):
    path = work / f"m{n:03d}{src.suffix}"
    path.write_bytes(blob)
    args = [a.replace("@FILE@", str(path)) for a in command]
    try:
        p = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        bad.append(f"{path.name} ({kind}): hang")
        continue
    out = p.stdout + p.stderr
    if p.returncode == 0:
        ok += 1
    elif p.returncode == 1 and "error:" in out and "Stack dump" not in out and "Sanitizer" not in out:
        rejected += 1
    else:
        bad.append(f"{path.name} ({kind}): exit {p.returncode}: {out[-300:]!r}")
print(f"{count} mutations of {src.name}: {ok} accepted, {rejected} rejected with a diagnostic, {len(bad)} bad")
for line in bad:
    print("BAD", line)
