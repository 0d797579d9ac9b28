#!/usr/bin/env python3
"""The PyTorch side of bench/train: the medium Llama of bench/forward
(make_model.py's seed, so the same weights as the ONNX file) trained with
AdamW (lr 1e-3, weight decay 0.01) on the same data as the compiled program,
each optimizer step K micro-batches of B sequences, the loss normalized by
the step's label tokens as tpc's program does.

    torch_step.py eager   MODEL_DIR DATA.npy --steps S --threads T
    torch_step.py dtensor MODEL_DIR DATA.npy --steps S   (2 processes x 1 thread,
                                                          gloo, Llama TP plan)

Prints one JSON object: per-step seconds and losses, and the peak RSS (MiB)
of each process."""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "forward"))
from make_model import medium_llama  # noqa: E402


def build(args):
    config = transformers.LlamaConfig.from_json_file(
        os.path.join(args.model_dir, "config.json"))
    model = medium_llama(config)  # the ONNX file's weights
    return model.to(torch.bfloat16) if args.dtype == "bf16" else model


def train(args, model, sync=lambda: None):
    ids = torch.from_numpy(np.load(args.data))
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad],
                            lr=1e-3, weight_decay=0.01)
    times, losses, row = [], [], 0
    b, k = args.micro_batch, args.grad_accum
    for _ in range(args.steps):
        sync()
        start = time.perf_counter()
        opt.zero_grad()
        batch = [ids[(row + i * b + j) % len(ids)] for i in range(k)
                 for j in range(b)]
        row += b * k
        tokens = sum(int(x.numel()) - 1 for x in batch)
        loss = 0.0
        for i in range(k):
            x = torch.stack(batch[i * b:(i + 1) * b])
            out = model(input_ids=x, labels=x, num_items_in_batch=tokens,
                        use_cache=False)
            out.loss.backward()
            loss += out.loss.item()
        opt.step()
        sync()
        times.append(time.perf_counter() - start)
        losses.append(loss)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"seconds": times, "losses": losses, "peak_rss_mib": rss}


def dtensor_worker(rank, port, queue, args):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel,
                                                   parallelize_module)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    model = build(args)
    plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Replicate())}
    for i in range(len(model.model.layers)):
        for name in ["q_proj", "k_proj", "v_proj"]:
            plan[f"model.layers.{i}.self_attn.{name}"] = ColwiseParallel()
        plan[f"model.layers.{i}.self_attn.o_proj"] = RowwiseParallel()
        for name in ["gate_proj", "up_proj"]:
            plan[f"model.layers.{i}.mlp.{name}"] = ColwiseParallel()
        plan[f"model.layers.{i}.mlp.down_proj"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    result = train(args, model, sync=dist.barrier)
    queue.put((rank, result))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["eager", "dtensor"])
    p.add_argument("model_dir")
    p.add_argument("data")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="bf16: the model converted with model.to(torch.bfloat16)")
    args = p.parse_args()
    if args.mode == "eager":
        torch.set_num_threads(args.threads)
        print(json.dumps(train(args, build(args))))
        return
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=dtensor_worker, args=(r, port, queue, args))
             for r in range(2)]
    for proc in procs:
        proc.start()
    results = dict(queue.get(timeout=600) for _ in procs)
    for proc in procs:
        proc.join()
    merged = results[0]
    merged["seconds"] = [max(a, b) for a, b in
                         zip(results[0]["seconds"], results[1]["seconds"])]
    merged["peak_rss_mib"] = max(r["peak_rss_mib"] for r in results.values())
    print(json.dumps(merged))


if __name__ == "__main__":
    main()
