#!/usr/bin/env python3
"""The peers of bench/checkpoint on the tensors tp-opt saved and loaded:
each of R ranks (R processes, gloo) holds the blocks the program's plan
gives it (trainer_state.json's placements: split blocks, replicated
tensors whole), for the weights and AdamW's two moments, and

  safetensors   saves them with safetensors.torch.save_file (a file per
                rank) and reads them back with load_file;
  dcp           saves them as DTensors (Shard / Replicate over the R
                ranks) with torch.distributed.checkpoint.save and loads
                them into fresh DTensors with dcp.load.

Prints one JSON line per peer: the slowest rank's seconds and each rank's
resident memory added during the save (VmHWM after clear_refs).

    peers.py CHECKPOINT_DIR WORK_DIR RANKS"""
import json
import os
import re
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def blocks(ckpt, rank, ranks):
    """This rank's blocks of the weights and moments, as the program holds
    them, with their placement."""
    state = json.load(open(os.path.join(ckpt, "trainer_state.json")))
    tensors = {}
    for prefix in ("model", "optimizer"):
        # Shards and their index, or one file (as transformers saves).
        index = os.path.join(ckpt, prefix + ".safetensors.index.json")
        files = (set(json.load(open(index))["weight_map"].values())
                 if os.path.exists(index) else {prefix + ".safetensors"})
        for name in files:
            tensors.update(load_file(os.path.join(ckpt, name)))
    out = {}
    for name, t in tensors.items():
        fqn = re.sub(r"\.(exp_avg|exp_avg_sq)$", "", name)
        placement = state["parameters"][fqn]["placement"]
        m = re.match(r"split\((\d+)\), blocks = (\d+), replicas = (\d+)",
                     placement)
        if m and ranks > 1:
            dim, nblocks, replicas = map(int, m.groups())
            index = rank // replicas
            out[name] = (t.chunk(nblocks, dim)[index].contiguous(), dim)
        else:
            out[name] = (t.contiguous(), None)
    return out


def worker(rank, ranks, ckpt, work, peer, queue):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    mine = blocks(ckpt, rank, ranks)
    dist.barrier()
    os.sync()
    out = os.path.join(work, peer)
    os.makedirs(out, exist_ok=True)
    if peer == "safetensors":
        path = os.path.join(out, f"rank{rank}.safetensors")
        local = {k: v for k, (v, _) in mine.items()}
        reset_peak()
        before = status_mib("VmRSS")
        start = time.perf_counter()
        save_file(local, path)
        dist.barrier()
        save_s = time.perf_counter() - start
        added = status_mib("VmHWM") - before
        del local
        os.sync()
        start = time.perf_counter()
        loaded = load_file(path)
        for v in loaded.values():  # the pages, as the program reads them
            v.sum()
        dist.barrier()
        load_s = time.perf_counter() - start
    else:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor, Replicate, Shard
        mesh = init_device_mesh("cpu", (ranks,))

        def as_dtensor(v, dim):
            place = [Shard(dim)] if dim is not None else [Replicate()]
            return DTensor.from_local(v, mesh, place, run_check=False)

        state = {k: as_dtensor(v, d) for k, (v, d) in mine.items()}
        reset_peak()
        before = status_mib("VmRSS")
        start = time.perf_counter()
        dcp.save(state, checkpoint_id=out)
        dist.barrier()
        save_s = time.perf_counter() - start
        added = status_mib("VmHWM") - before
        fresh = {k: as_dtensor(torch.empty_like(v), d)
                 for k, (v, d) in mine.items()}
        del state
        os.sync()
        start = time.perf_counter()
        dcp.load(fresh, checkpoint_id=out)
        dist.barrier()
        load_s = time.perf_counter() - start
    params = sum(v.numel() * v.element_size() for k, (v, _) in mine.items()
                 if not k.endswith(("exp_avg", "exp_avg_sq"))) / 2**20
    queue.put((rank, save_s, load_s, added, params))
    dist.destroy_process_group()


def main():
    ckpt, work, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = mp.get_context("spawn")
    for peer in ("safetensors", "dcp"):
        queue = ctx.Queue()
        procs = [ctx.Process(target=worker,
                             args=(r, ranks, ckpt, work, peer, queue))
                 for r in range(ranks)]
        for p in procs:
            p.start()
        results = sorted(queue.get() for _ in procs)
        for p in procs:
            p.join()
            if p.exitcode:
                sys.exit(f"{peer}: a rank failed")
        print(json.dumps({
            "peer": peer, "ranks": ranks,
            "save_s": max(r[1] for r in results),
            "load_s": max(r[2] for r in results),
            "added_mib": [round(r[3], 1) for r in results],
            "params_mib": [round(r[4], 1) for r in results]}))


if __name__ == "__main__":
    main()
