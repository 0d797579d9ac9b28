#!/usr/bin/env python3
"""The device check's model of the size users train: a Llama-3.2-1B-shaped
decoder (hidden 2048, 16 layers, 32 heads and 8 KV heads of 64, MLP 8192,
vocabulary 128256, tied embeddings) as bf16 programs, against PyTorch on the
same device, bf16 on both sides (README.md).

    large.py export DIR [--shape llama-3.2-1b|tiny]
        The graph only (built on the meta device, the dynamo exporter, as
        bench/compile does; its weights a sparse file never written) as
        DIR/model.onnx, and its transformers config as DIR/config.json.
        `tiny` is the same architecture small enough for the CPU (CI).

`bench/device-check.sh prepare` compiles it (tpc --dtype bf16, forward and
--train) and `run` calls measure() from bench/device_check.py: the weights
are made on the device from seed 0 by PyTorch and read by the programs
from that checkpoint.
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPES = {
    "llama-3.2-1b": dict(
        vocab_size=128256, hidden_size=2048, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        intermediate_size=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
        tie_word_embeddings=True),
    # The same architecture at a size the CPU runs in seconds.
    "tiny": dict(
        vocab_size=512, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=128, rms_norm_eps=1e-5, rope_theta=500000.0,
        tie_word_embeddings=True),
}

# What each run measures: batch x seq tokens a step, training steps (the
# median of steps 3 on), forward passes.
RUNS = {
    "llama-3.2-1b": dict(batch=4, seq=2048, steps=6, iters=10),
    "tiny": dict(batch=2, seq=32, steps=4, iters=3),
}

# Dense bf16 tensor-core peaks (FLOP/s, without sparsity) by device name:
# NVIDIA's datasheets. The first name found in torch's device name wins.
PEAK_BF16 = [("H200", 989.4e12), ("H100 PCIe", 756.0e12), ("H100", 989.4e12),
             ("A100", 312.0e12)]

# bf16 programs against PyTorch's f32 run of the same weights: logits
# within 2e-2 relative to max(1, max|ref|) (test/e2e/dtypes.test's bound)
# or 1.5 times PyTorch bf16's own distance, whichever is larger; the
# step-1 loss within 2e-3.
LOGITS_RTOL = 2e-2
LOGITS_MARGIN = 1.5
LOSS_RTOL = 2e-3


def matmul_params(c):
    """Weights that multiply every token: the layers' projections and the
    output projection (counted even when tied to the embedding table: it
    is a GEMM all the same); not the embedding lookup or the norms."""
    h, d = c["hidden_size"], c["head_dim"]
    attn = h * d * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"])
    mlp = 3 * h * c["intermediate_size"]
    return c["num_hidden_layers"] * (attn + mlp) + c["vocab_size"] * h


def flops_per_token(c, seq, training):
    """torchtitan's count (and PaLM's): 6 N + 12 L H Dh S for a training
    step, a third of it for the forward; the causal attention counted as
    if every key were visible, as they count it."""
    attention = 12 * c["num_hidden_layers"] * c["num_attention_heads"] * c["head_dim"] * seq
    train = 6 * matmul_params(c) + attention
    return train if training else train // 3


def peak_flops(name):
    for key, value in PEAK_BF16:
        if key in name:
            return value
    return None


def export(directory, shape):
    import transformers
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "compile"))
    sys.path.insert(0, os.path.join(here, "..", "..", "test", "models"))
    from export_dynamo import export_meta
    config = transformers.LlamaConfig(**SHAPES[shape])
    nodes, size = export_meta(config, directory)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"shape": shape, **SHAPES[shape]}, f, indent=1)
    print(f"large.py: {shape} graph, {nodes} nodes, {size / 2**30:.1f} GiB of f32 weights (sparse)")


def _model(config, device):
    """LlamaForCausalLM in bf16 on `device`, its weights made there from
    seed 0, with random norm weights (all-equal ones would hide a norm
    applied to the wrong tensor)."""
    import torch
    import transformers
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.config._attn_implementation = "sdpa"
    return model.to(torch.bfloat16)


def _run(cmd, timeout=900):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    return (r.stdout if r.returncode == 0 else None), (r.stdout + r.stderr)


def _peak(log):
    found = re.search(r"peak memory \([^)]*\): rank 0 (\d+) bytes", log or "")
    return int(found.group(1)) if found else None


def _loss(logits, ids):
    import torch
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))


def _torch_side(model, ids, tokens, run, device, compiled):
    """PyTorch's forward (ms, peak bytes) and training step (ms, step-1
    loss, peak bytes), eager or under torch.compile."""
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    peak = (lambda: torch.cuda.max_memory_allocated()) if device == "cuda" else (lambda: None)
    reset = torch.cuda.reset_peak_memory_stats if device == "cuda" else (lambda: None)
    step_fn = torch.compile(model) if compiled else model
    out = {}
    model.eval()
    reset()
    times = []
    with torch.no_grad():
        for i in range(run["iters"] + 2):
            sync()
            t0 = time.perf_counter()
            step_fn(ids)
            sync()
            if i >= 2:
                times.append(time.perf_counter() - t0)
    out["forward_ms"], out["forward_peak"] = 1e3 * float(np.median(times)), peak()
    model.train()
    if device == "cuda":
        torch.cuda.empty_cache()
    reset()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    times = []
    b = run["batch"]
    for step in range(run["steps"]):
        x = tokens[step * b:(step + 1) * b]
        sync()
        t0 = time.perf_counter()
        loss = _loss(step_fn(x).logits, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
        if step == 0:
            out["loss"] = loss.item()
    out["train_ms"], out["train_peak"] = 1e3 * float(np.median(times[2:])), peak()
    return out


def measure(directory, programs, gpu, say, failures, torch_compile=True):
    """The large model's rows of the device check: ours (bf16 programs
    large_llama and large_llama_train) against PyTorch eager (sdpa) and,
    on the GPU unless `torch_compile` is off, torch.compile, bf16 on both
    sides."""
    forward = os.path.join(programs, "large_llama")
    train = os.path.join(programs, "large_llama_train")
    config_path = os.path.join(directory, "large_llama_config.json")
    if not (os.path.exists(forward) and os.path.exists(train) and os.path.exists(config_path)):
        say("Large Llama: not prepared")
        return
    try:
        import torch
        import transformers
        from safetensors.torch import save_file
    except ImportError:
        say("Large Llama: skipped: no PyTorch")
        return
    shape = json.load(open(config_path))
    name = shape.pop("shape")
    run = RUNS[name]
    device = "cuda" if gpu else "cpu"
    config = transformers.LlamaConfig(**shape)
    tmp = tempfile.mkdtemp(prefix="large-")
    model = _model(config, device)
    checkpoint = os.path.join(tmp, "model.safetensors")
    # The tied table once, under the embedding's name (as HF saves it).
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (shape["tie_word_embeddings"] and k == "lm_head.weight")}
    save_file(state, checkpoint)
    del state
    rng = np.random.default_rng(11)
    b, s = run["batch"], run["seq"]
    ids = rng.integers(0, shape["vocab_size"], size=(b, s), dtype=np.int64)
    tokens = rng.integers(0, shape["vocab_size"], size=(b * run["steps"], s), dtype=np.int64)
    short = ids[:1, : min(s, 128)]
    for array, file in ((ids, "ids.npy"), (tokens, "tokens.npy"), (short, "short.npy")):
        np.save(os.path.join(tmp, file), array)
    common = ["--device", device, "--weights", checkpoint, "--report-memory"]
    if not gpu:
        common += ["--threads", str(min(16, os.cpu_count() or 1))]

    # The oracle: PyTorch's model in f32 with the same (bf16) weights. A
    # bf16 program is held to being no further from it than PyTorch's bf16
    # model is, within a margin: two bf16 runs round in different places,
    # and across 16 layers each differs from the other more than from f32.
    reference = copy.deepcopy(model).float().eval()
    with torch.no_grad():
        short_t = torch.from_numpy(short).to(device)
        ref32 = reference(short_t).logits.cpu().numpy()
        torch16 = model.eval()(short_t).logits.float().cpu().numpy()
        first = torch.from_numpy(tokens[:run["batch"]]).to(device)
        loss32 = _loss(reference(first).logits, first).item()
    del reference
    rel = lambda a: float(np.abs(a - ref32).max()) / max(1.0, float(np.abs(ref32).max()))
    torch_rel = rel(torch16)
    logits_bound = max(LOGITS_RTOL, LOGITS_MARGIN * torch_rel)

    ours = {}
    # Logits on a short input (the long input's would be 4 GiB of f32).
    out, log = _run([forward, "--input", os.path.join(tmp, "short.npy"),
                     "--output", os.path.join(tmp, "short_logits.npy")] + common)
    logits_rel = rel(np.load(os.path.join(tmp, "short_logits.npy"))) if out is not None else None
    if logits_rel is None or logits_rel > logits_bound:
        failures.append(f"large Llama logits vs PyTorch f32 ({logits_rel}, bound {logits_bound:.1e})")
        say(f"<!-- large forward: {log[-400:]} -->")
    out, log = _run([forward, "--input", os.path.join(tmp, "ids.npy"),
                     "--output", os.path.join(tmp, "logits.npy"),
                     "--bench", str(run["iters"])] + common)
    if out is not None:
        ours["forward_ms"] = float(re.search(r"median ([0-9.]+) ms", out).group(1))
        ours["forward_peak"] = _peak(out)
    else:
        failures.append("large Llama forward")
        say(f"<!-- large forward: {log[-400:]} -->")
    if os.path.exists(os.path.join(tmp, "logits.npy")):
        os.remove(os.path.join(tmp, "logits.npy"))
    out, log = _run([train, "--train", "--data", os.path.join(tmp, "tokens.npy"),
                     "--steps", str(run["steps"]), "--micro-batch", str(b), "--grad-accum", "1",
                     "--lr", "1e-4", "--weight-decay", "0.01"] + common)
    steps = re.findall(r"step \d+ loss ([0-9.eE+-]+) grad_norm \S+ tokens/s ([0-9.]+)", out or "")
    if out is not None and len(steps) == run["steps"]:
        ours["train_ms"] = float(np.median([1e3 * b * s / float(t) for _, t in steps[2:]]))
        ours["loss"] = float(steps[0][0])
        ours["train_peak"] = _peak(out)
    else:
        failures.append("large Llama training")
        say(f"<!-- large training: {log[-400:]} -->")

    ids_t = torch.from_numpy(ids).to(device)
    tokens_t = torch.from_numpy(tokens).to(device)
    peers = {"PyTorch eager (sdpa)": _torch_side(model, ids_t, tokens_t, run, device, False)}
    del model
    if gpu and torch_compile:
        torch.cuda.empty_cache()
        peers["PyTorch torch.compile"] = _torch_side(_model(config, device), ids_t, tokens_t, run,
                                                     device, True)
    loss_rel = abs(ours["loss"] - loss32) / abs(loss32) if "loss" in ours else None
    torch_loss_rel = abs(peers["PyTorch eager (sdpa)"]["loss"] - loss32) / abs(loss32)
    if loss_rel is None or loss_rel > LOSS_RTOL:
        failures.append(f"large Llama step-1 loss vs PyTorch f32 ({loss_rel})")

    gpu_name = torch.cuda.get_device_name() if gpu else "the CPU"
    peak = peak_flops(gpu_name) if gpu else None
    fwd_flops, train_flops = flops_per_token(shape, s, False), flops_per_token(shape, s, True)
    say(f"Large Llama ({name}: hidden {shape['hidden_size']}, {shape['num_hidden_layers']} layers, "
        f"{shape['num_attention_heads']}/{shape['num_key_value_heads']} heads of {shape['head_dim']}, "
        f"MLP {shape['intermediate_size']}, vocab {shape['vocab_size']}, tied; "
        f"{matmul_params(shape)} matmul weights), bf16 programs against PyTorch's model in bf16 on "
        f"{gpu_name}, batch {b} x seq {s}; forward median of {run['iters']}, AdamW steps 3-{run['steps']}; "
        f"{fwd_flops} and {train_flops} FLOP a token (forward, training step)"
        + (f"; MFU against {peak / 1e12:.1f} TFLOP/s dense bf16" if peak else "") + ":")
    columns = [("ours", ours)] + list(peers.items())
    say("| | " + " | ".join(n for n, _ in columns) + " | "
        + " | ".join(f"ours / {n}" for n, _ in columns[1:]) + " |")
    say("|---" * (1 + 2 * len(columns) - 1) + "|")

    def row(label, key, fmt, ratio=True):
        cells = [fmt(v[key]) if v.get(key) is not None else "-" for _, v in columns]
        ratios = [f"{ours[key] / v[key]:.2f}" if ratio and ours.get(key) and v.get(key) else "-"
                  for _, v in columns[1:]]
        say(f"| {label} | " + " | ".join(cells + ratios) + " |")

    for _, v in columns:
        if v.get("forward_ms"):
            v["forward_tps"] = b * s / (v["forward_ms"] / 1e3)
        if v.get("train_ms"):
            v["train_tps"] = b * s / (v["train_ms"] / 1e3)
            if peak:
                v["mfu"] = v["train_tps"] * train_flops / peak
    gib = lambda x: f"{x / 2**30:.2f}"
    row("forward (ms)", "forward_ms", lambda x: f"{x:.2f}")
    row("forward tokens/s", "forward_tps", lambda x: f"{x:.0f}", ratio=False)
    row("training step (ms)", "train_ms", lambda x: f"{x:.2f}")
    row("training tokens/s", "train_tps", lambda x: f"{x:.0f}", ratio=False)
    if peak:
        row("training MFU", "mfu", lambda x: f"{100 * x:.1f}%", ratio=False)
    if gpu:
        row("peak GPU memory, forward (GiB)", "forward_peak", gib)
        row("peak GPU memory, training (GiB)", "train_peak", gib)
    else:
        row("peak host memory, ours (GiB)", "train_peak", gib, ratio=False)
    row("step-1 loss", "loss", lambda x: f"{x:.6f}", ratio=False)
    fmt = lambda v: "failed" if v is None else f"{v:.1e}"
    say(f"Against PyTorch's model in f32 with the same weights: logits (batch 1 x seq {short.shape[1]}) "
        f"ours {fmt(logits_rel)}, PyTorch bf16 {torch_rel:.1e} (bound {logits_bound:.1e}); step-1 loss "
        f"ours {fmt(loss_rel)}, PyTorch bf16 {torch_loss_rel:.1e} (bound {LOSS_RTOL:.0e}).")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir")
    e.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.2-1b")
    a = p.parse_args()
    export(a.dir, a.shape)
