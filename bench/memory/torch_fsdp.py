#!/usr/bin/env python3
"""The PyTorch peer of bench/memory: the model of MODEL_DIR (transformers'
from_pretrained, float32) trained as NeMo AutoModel and torchtitan train it,
FSDP2 over the data-parallel ranks with DTensor tensor parallelism inside:
with --tp 2 the decoder layers' projections are split by the Qwen2 plan
(q, k, v, gate, up column-wise; o, down row-wise), then `fully_shard` on
every decoder layer and on the root (reshard_after_forward=True, FSDP2's
default), over a (dp, tp) device mesh on gloo, one thread per process.
AdamW (lr 1e-3, weight decay 0.01) on the same rows the compiled program
reads: data-parallel rank d takes rows d, d + D, ... of each step's D x B.

    torch_fsdp.py MODEL_DIR DATA.npy --dp D --tp T --steps S --micro-batch B

Prints one JSON object: per-step seconds and the global batch's losses
(rank 0), and each process's peak RSS (MiB)."""
import argparse
import json
import os
import queue as queue_module
import resource
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import transformers


def worker(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    world = args.dp * args.tp
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel,
                                                   parallelize_module)
    mesh = init_device_mesh("cpu", (args.dp, args.tp),
                            mesh_dim_names=("dp", "tp"))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.model_dir, dtype=torch.float32, attn_implementation="eager")
    if args.tp > 1:
        for layer in model.model.layers:
            plan = {f"self_attn.{p}": ColwiseParallel()
                    for p in ("q_proj", "k_proj", "v_proj")}
            plan["self_attn.o_proj"] = RowwiseParallel()
            plan.update({f"mlp.{p}": ColwiseParallel()
                         for p in ("gate_proj", "up_proj")})
            plan["mlp.down_proj"] = RowwiseParallel()
            parallelize_module(layer, mesh["tp"], plan)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids = torch.from_numpy(np.load(args.data))
    d = mesh.get_coordinate()[0]
    times, losses, row = [], [], 0
    b = args.micro_batch
    for _ in range(args.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        rows = [(row + d * b + j) % len(ids) for j in range(b)]
        row += args.dp * b
        x = ids[rows]
        loss = model(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        opt.step()
        total = torch.tensor([loss.item()])
        dist.all_reduce(total)
        dist.barrier()
        times.append(time.perf_counter() - start)
        # Every rank's rows have the same tokens: the mean of the ranks'
        # means is the global batch's (each tensor-parallel rank counted).
        losses.append(total.item() / world)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    queue.put((rank, {"seconds": times, "losses": losses,
                      "peak_rss_mib": rss}))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("data")
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--micro-batch", type=int, default=1)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    world = args.dp * args.tp
    procs = [ctx.Process(target=worker, args=(r, args, port, queue))
             for r in range(world)]
    for proc in procs:
        proc.start()
    # A worker that dies (the kernel's OOM killer) ends the run, not a wait.
    results = {}
    while len(results) < world:
        try:
            rank, result = queue.get(timeout=5)
            results[rank] = result
        except queue_module.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                for proc in procs:
                    proc.kill()
                raise SystemExit(f"torch_fsdp.py: a worker exited with "
                                 f"{dead[0]} (-9: killed, e.g. out of memory)")
    for proc in procs:
        proc.join()
    merged = results[0]
    merged["seconds"] = [max(r["seconds"][i] for r in results.values())
                         for i in range(args.steps)]
    merged["peak_rss_mib"] = [results[r]["peak_rss_mib"]
                              for r in sorted(results)]
    print(json.dumps(merged))


if __name__ == "__main__":
    main()
