#!/usr/bin/env python3
"""The checks of `bench/device-check.sh run`, after its build: every test
model's reference inputs on the CPU and the CUDA backend against the
PyTorch logits committed with the model and against each other (f32:
max|diff| <= 1e-4 * max(1, max|ref|) at the positions the mask keeps), two
ranks on one GPU refused with a message, a collective the stream reaches
only after the timeout stopped by the watchdog, and the medium Llama's forward
time against PyTorch eager on the same GPU (weights made here with
PyTorch, seed 0, and read by the program from that checkpoint), and the
large model's (bench/large) against PyTorch eager and torch.compile. Writes
DIR/device-check.log (the tables) and exits non-zero when a check fails.
Without a GPU (or with --cpu-only) the CUDA columns say "skipped: no GPU".

    device_check.py --dir DIR --programs BIN --root ROOT [--iters N] [--cpu-only]
                    [--no-torch-compile]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

RTOL = 1e-4
# bf16 autocast rounds every linear's operands to 8 mantissa bits: its
# logits and training runs are held to these instead. Measured on an H200
# (docs/gpu.md): logits 2.2e-3 to 2.7e-2 (Gemma3 the largest), losses up to
# 2.6e-3, grad norms up to 3.5e-2 (Gemma3; the others 8.1e-4), weights up to
# 2.1e-2.
BF16_LOGITS_RTOL = 5e-2
BF16_TRAIN = ["--rtol", "5e-2", "--first-norm-rtol", "5e-2", "--wtol", "5e-2"]
# bf16 programs (a bf16 checkpoint, or tpc --dtype bf16: parameters and
# activations bf16) against PyTorch's own bf16 run, the bounds of
# test/e2e/dtypes.test on the CPU: logits 2e-2 relative (Gemma3 5e-2), and
# the backends against each other as far (their products' sums round to
# bf16 in different places); training: losses and grad norms 2e-3, weights
# 3e-2 norm-wise.
BF16_PROGRAM_RTOL = {"gemma3_bf16": 5e-2}
BF16_PROGRAM_DEFAULT_RTOL = 2e-2
BF16_PROGRAM_TRAIN = ["--rtol", "2e-3", "--first-norm-rtol", "2e-3", "--wtol", "3e-2",
                      "--expect-dtype", "bf16"]

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--programs", required=True)
p.add_argument("--root", required=True)
p.add_argument("--iters", type=int, default=30)
p.add_argument("--cpu-only", action="store_true")
p.add_argument("--no-torch-compile", action="store_true")
args = p.parse_args()

lines = []
failures = []


def say(text=""):
    print(text)
    lines.append(text)


def has_gpu():
    if args.cpu_only or not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


GPU = has_gpu()


def torch_cudnn():
    """PyTorch's cuDNN (the pip wheel's), which the peer runs, or None."""
    for entry in sys.path:
        path = os.path.join(entry, "nvidia", "cudnn", "lib", "libcudnn.so.9")
        if os.path.exists(path):
            return path
    return None


# The programs' fused attention opens the cuDNN PyTorch brings where there
# is one (runtime/src/cuda/Cudnn.h), else the CUDA toolkit's.
if "TPRT_CUDNN_LIBRARY" not in os.environ and torch_cudnn():
    os.environ["TPRT_CUDNN_LIBRARY"] = torch_cudnn()
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]


def run(exe, ids, out, device, weights, mask=None, ranks=1, extra=(), timeout=600):
    """Runs a program; returns (logits or None, stdout + stderr)."""
    cmd = [exe, "--input", ids, "--output", out, "--device", device, "--weights", weights]
    if mask:
        cmd += ["--attention-mask", mask]
    cmd += list(extra)
    if ranks > 1:
        cmd = MPIRUN + [str(ranks)] + cmd
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if r.returncode != 0:
        return None, (r.stdout + r.stderr).strip()
    return np.load(out), r.stdout


def rel(got, ref, keep):
    """max|got - ref| over the kept positions, relative to max(1, max|ref|)."""
    if got is None or got.shape != ref.shape:
        return None
    return float(np.abs(got - ref)[keep].max()) / max(1.0, float(np.abs(ref[keep]).max()))


def cell(value, bound=RTOL):
    if value is None:
        return "failed"
    return f"{value:.1e} {'ok' if value <= bound else 'FAIL'}"


def check(name, value, what, bound=RTOL):
    if value is None or value > bound:
        failures.append(f"{name}: {what}")


def compare_gpu(name, tag, exe, ids, mask, weights, ref, cpu, keep, kind="", bound=RTOL):
    """The program on the GPU against the reference and the CPU's logits:
    (relative difference to the reference, to the CPU)."""
    gpu, log = run(exe, ids, os.path.join(tmp, "gpu.npy"), "cuda", weights, mask)
    if gpu is None:
        say(f"<!-- {name} {tag} cuda: {log[-400:]} -->")
    gpu_ref, gpu_cpu = rel(gpu, ref, keep), rel(gpu, cpu, keep) if cpu is not None else None
    check(f"{name} {tag}", gpu_ref, f"CUDA{kind} vs PyTorch{kind}", bound)
    check(f"{name} {tag}", gpu_cpu, f"CUDA{kind} vs CPU{kind}", bound)
    return gpu_ref, gpu_cpu


manifest = [l.rstrip("\n").split("\t") for l in open(os.path.join(args.dir, "manifest.tsv")) if l.strip()]
gpu_name = "none"
if GPU:
    gpu_name = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
say(f"bench/device-check.sh run, {time.strftime('%Y-%m-%d %H:%M:%S')}; GPU: {gpu_name}; "
    f"CPU threads: {os.cpu_count()}")
say("cuDNN for the fused attention: " + os.environ.get("TPRT_CUDNN_LIBRARY", "the CUDA toolkit's (as built)"))
say()
# The CUDA kernels one by one against the CPU kernels (runtime/test/
# CudaKernelsTest.cpp): its failing lines and its summary.
kernel_test = os.path.join(os.path.dirname(os.path.abspath(args.programs)), "bin", "tprt-cuda-test")
r = subprocess.run([kernel_test], capture_output=True, text=True, timeout=600)
kernel_lines = (r.stdout + r.stderr).strip().splitlines()
if r.returncode == 77:
    say("Kernel test (tprt-cuda-test): " + (kernel_lines[-1] if kernel_lines else "skipped"))
else:
    if r.returncode != 0:
        failures.append("tprt-cuda-test")
    diffs = [float(m.group(1)) for m in
             (re.match(r"(?:ok|FAIL) .*: (\S+)$", l) for l in kernel_lines) if m]
    worst = max(diffs, default=float("nan"))
    say(f"Kernel test (tprt-cuda-test, each CUDA kernel against the CPU kernel, relative max|diff|): "
        f"{kernel_lines[-1] if kernel_lines else 'no output'}; worst {worst:.1e}")
    for line in kernel_lines:
        if line.startswith("FAIL") or line.startswith("skipped"):
            say("  " + line)
say()
say("Test models (test/models/NAME/ts_fold.onnx), logits relative max|diff| at the kept positions, "
    f"bound {RTOL:g}:")
say(f"| program | input | CPU vs PyTorch | CUDA vs PyTorch | CUDA vs CPU | CUDA bf16 autocast vs PyTorch "
    f"(bound {BF16_LOGITS_RTOL:g}) |")
say("|---|---|---|---|---|---|")
tmp = tempfile.mkdtemp()
for name, model, refdir, ranks in manifest:
    ranks = int(ranks)
    exe = os.path.join(args.programs, name)
    weights = os.path.join(args.root, model)
    refdir = os.path.join(args.root, refdir)
    # The references of the plain run: logits with inputs of their own
    # (not logits_autocast_*, logits_upcast_*).
    tags = sorted(f[len("logits_"):-4] for f in os.listdir(refdir)
                  if f.startswith("logits_")
                  and os.path.exists(os.path.join(refdir, "input_ids_" + f[len("logits_"):])))
    for tag in tags:
        ids = os.path.join(refdir, f"input_ids_{tag}.npy")
        mask = os.path.join(refdir, f"attention_mask_{tag}.npy")
        mask = mask if os.path.exists(mask) else None
        ref = np.load(os.path.join(refdir, f"logits_{tag}.npy"))
        keep = np.load(mask).astype(bool) if mask else np.ones(ref.shape[:2], bool)
        cpu, log = run(exe, ids, os.path.join(tmp, "cpu.npy"), "cpu", weights, mask, ranks)
        if cpu is None:
            say(f"<!-- {name} {tag} cpu: {log[-400:]} -->")
        cpu_ref = rel(cpu, ref, keep)
        check(f"{name} {tag}", cpu_ref, "CPU vs PyTorch")
        if not GPU:
            gpu_cells = ["skipped: no GPU"] * 3
        elif ranks > 1:
            gpu_cells = ["n/a (one GPU)"] * 3
        else:
            gpu_ref, gpu_cpu = compare_gpu(name, tag, exe, ids, mask, weights, ref, cpu, keep)
            bf16, log = run(exe, ids, os.path.join(tmp, "bf16.npy"), "cuda", weights, mask,
                            extra=["--autocast", "bf16"])
            if bf16 is None:
                say(f"<!-- {name} {tag} cuda bf16: {log[-400:]} -->")
            bf16_ref = rel(bf16, ref, keep)
            check(f"{name} {tag}", bf16_ref, "CUDA bf16 autocast vs PyTorch", BF16_LOGITS_RTOL)
            gpu_cells = [cell(gpu_ref), cell(gpu_cpu), cell(bf16_ref, BF16_LOGITS_RTOL)]
        say(f"| {name}{' (mpirun -np %d)' % ranks if ranks > 1 else ''} | {tag} | {cell(cpu_ref)} | "
            f"{gpu_cells[0]} | {gpu_cells[1]} | {gpu_cells[2]} |")

# bf16 programs on both backends against PyTorch's bf16 run.
say()
bf16_list = os.path.join(args.dir, "bf16.tsv")
bf16_rows = [l.rstrip("\n").split("\t") for l in open(bf16_list) if l.strip()] \
    if os.path.exists(bf16_list) else []
say("bf16 programs (test/models/NAME_bf16, parameters and activations bf16), logits relative max|diff| "
    f"at the kept positions against PyTorch's bf16 run, bound {BF16_PROGRAM_DEFAULT_RTOL:g} "
    "(Gemma3 5e-2):")
say("| program | input | CPU vs PyTorch bf16 | CUDA vs PyTorch bf16 | CUDA vs CPU |")
say("|---|---|---|---|---|")
for name, model, refdir in bf16_rows:
    bound = BF16_PROGRAM_RTOL.get(name, BF16_PROGRAM_DEFAULT_RTOL)
    exe = os.path.join(args.programs, name)
    weights = os.path.join(args.root, model)
    refdir = os.path.join(args.root, refdir)
    for tag in ["b3_s12_pad"]:
        ids = os.path.join(refdir, f"input_ids_{tag}.npy")
        mask = os.path.join(refdir, f"attention_mask_{tag}.npy")
        ref = np.load(os.path.join(refdir, f"logits_{tag}.npy")).astype(np.float32)
        keep = np.load(mask).astype(bool)
        cpu, log = run(exe, ids, os.path.join(tmp, "cpu.npy"), "cpu", weights, mask)
        if cpu is None:
            say(f"<!-- {name} {tag} cpu: {log[-400:]} -->")
        cpu_ref = rel(cpu, ref, keep)
        check(f"{name} {tag}", cpu_ref, "CPU bf16 vs PyTorch bf16", bound)
        if not GPU:
            gpu_cells = ["skipped: no GPU"] * 2
        else:
            gpu_ref, gpu_cpu = compare_gpu(name, tag, exe, ids, mask, weights, ref, cpu, keep,
                                           " bf16", bound)
            gpu_cells = [cell(gpu_ref, bound), cell(gpu_cpu, bound)]
        say(f"| {name} | {tag} | {cell(cpu_ref, bound)} | {gpu_cells[0]} | {gpu_cells[1]} |")

# Two ranks on one GPU: NCCL cannot; the runtime says so before any work.
say()
multi = [(n, m, r) for n, m, r, k in manifest if int(k) > 1]
if not GPU:
    say("Two ranks on one GPU: skipped: no GPU")
elif multi:
    name, model, refdir = multi[0]
    refdir = os.path.join(args.root, refdir)
    ids = os.path.join(refdir, sorted(f for f in os.listdir(refdir) if f.startswith("input_ids_"))[0])
    start = time.time()
    got, log = run(os.path.join(args.programs, name), ids, os.path.join(tmp, "x.npy"), "cuda",
                   os.path.join(args.root, model), ranks=2, timeout=120)
    took = time.time() - start
    message = re.search(r"tprt: error[^\n]*", log or "")
    ok = got is None and message is not None and "GPU" in message.group(0)
    if not ok:
        failures.append("two ranks on one GPU were not refused with a message")
    say(f"Two ranks on one GPU ({name}, --device cuda): {'refused' if ok else 'NOT refused'} in {took:.1f} s: "
        f"{message.group(0) if message else log[-300:]}")

# The collective timeout (src/cuda/Watchdog.h): an all-reduce held back 8 s
# on the stream with a 1 s timeout must end the program, naming it.
say()
if not GPU:
    say("Collective timeout: skipped: no GPU")
else:
    start = time.time()
    r = subprocess.run([kernel_test, "--stuck-collective"], capture_output=True, text=True, timeout=120)
    took = time.time() - start
    message = re.search(r"tprt: error[^\n]*", r.stdout + r.stderr)
    ok = r.returncode not in (0, 77) and message is not None and "did not finish within 1 s" in message.group(0)
    if not ok:
        failures.append("the collective timeout did not stop a stuck all-reduce")
    say(f"Collective timeout (1 s, an all-reduce held back 8 s): {'stopped' if ok else 'NOT stopped'} "
        f"after {took:.1f} s, exit {r.returncode}: "
        f"{message.group(0) if message else (r.stdout + r.stderr)[-300:]}")

# The replica-gradient buckets' pack (one kernel) and the bf16 gradients'
# cast into their FP32 buffers, against cudaMemcpy of the same bytes
# (bench/gradsync on one GPU: its NCCL columns are a world of one).
say()
if not GPU:
    say("Bucket pack+cast bandwidth: skipped: no GPU")
else:
    gradsync = os.path.join(os.path.dirname(kernel_test), "tprt-gradsync-bench")
    r = subprocess.run(MPIRUN + ["1", gradsync, "--device", "cuda", "--rounds", "5"],
                       capture_output=True, text=True, timeout=600)
    rows = [l for l in r.stdout.splitlines() if l.startswith("|")]
    if r.returncode != 0 or len(rows) < 4:
        failures.append("bench/gradsync --device cuda")
        say(f"Bucket pack+cast bandwidth: failed: {(r.stdout + r.stderr)[-400:]}")
    else:
        say("Bucket pack+cast bandwidth (bench/gradsync --device cuda, one GPU; the pack is one kernel "
            "for all of a bucket's gradients, the cast is accumulate_grad of bf16 gradients into their "
            "FP32 buffers):")
        say("| gradient set | FP32 bytes | pack GB/s | cudaMemcpy GB/s | pack speed / copy | "
            "bf16 cast into FP32 buffers GB/s |")
        say("|---|---|---|---|---|---|")
        for row in rows[2:]:
            c = [x.strip() for x in row.strip("|").split("|")]
            say(f"| {c[0]} | {c[2]} | {c[12]} | {c[13]} | {c[14]} | {c[15]} |")

# Training: three steps of each model against its PyTorch run, on both
# backends (test/e2e/compare_training.py), and the two backends' losses.
say()
train_list = os.path.join(args.dir, "train.tsv")
train_rows = [l.rstrip("\n").split("\t") for l in open(train_list) if l.strip()] \
    if os.path.exists(train_list) else []
compare = os.path.join(args.root, "test", "e2e", "compare_training.py")
step_line = re.compile(r"(ok|FAIL): step (\d+) (loss|grad_norm) ([0-9.eE+-]+) vs \S+ \(rel ([0-9.eE+-]+)\)")
say("Training (test/models/NAME/train: 3 AdamW steps of 2 micro-batches x 2 sequences against the PyTorch run; "
    "loss and grad norm per step within 1e-5 relative, the first norm within 1e-6, saved weights within 1e-4 "
    "norm-wise; NAME_train_bf16: tpc --dtype bf16 against PyTorch's bf16 run (NAME/train_bf16), losses and "
    "norms within 2e-3, weights within 3e-2):")
say("| program | CPU: loss, norm, weights (worst relative) | CUDA: loss, norm, weights | CUDA vs CPU losses | "
    "CUDA bf16 autocast: loss, norm, weights (bound 5e-2) |")
say("|---|---|---|---|---|")


def train_cell(result):
    good, out, losses, rels, worst = result
    if not losses:
        return "failed: " + (re.findall(r"tprt: error[^\n]*", out) or [out[-200:]])[0]
    loss_rel = max(r for k, r in rels if k == "loss")
    norm_rel = max(r for k, r in rels if k == "grad_norm")
    return (f"{'ok' if good else 'FAIL'}: {loss_rel:.1e}, {norm_rel:.1e}, "
            f"{worst if worst else '?'}")


for name, model, traindir, dtype in train_rows:
    exe = os.path.join(args.programs, name)
    results = {}
    # A bf16 program (parameters and activations bf16) on both backends;
    # an f32 one also with bf16 autocast on the GPU.
    devices = ["cpu"] + ((["cuda", "bf16"] if dtype == "f32" else ["cuda"]) if GPU else [])
    for device in devices:
        extra = BF16_TRAIN + ["--autocast", "bf16"] if device == "bf16" else []
        if dtype == "bf16":
            extra = BF16_PROGRAM_TRAIN
        r = subprocess.run([sys.executable, compare, exe, os.path.join(args.root, traindir),
                            "--device", "cpu" if device == "cpu" else "cuda",
                            "--weights", os.path.join(args.root, model)] + extra,
                           capture_output=True, text=True, timeout=900)
        out = r.stdout + r.stderr
        found = step_line.findall(out)
        losses = [float(v) for _, _, key, v, _ in found if key == "loss"]
        rels = [(key, float(rel)) for _, _, key, _, rel in found]
        worst = re.search(r"worst relative difference ([0-9.eE+-]+)", out)
        results[device] = (r.returncode == 0, out, losses, rels, worst.group(1) if worst else None)
        if r.returncode != 0:
            failures.append(f"{name}: training on {device}")
            say(f"<!-- {name} {device}: {out[-500:]} -->")
    cpu_cell = train_cell(results["cpu"])
    if "cuda" in results:
        cuda_cell = train_cell(results["cuda"])
        a, b = results["cpu"][2], results["cuda"][2]
        vs = f"{max(abs(x - y) / abs(x) for x, y in zip(a, b)):.1e}" if a and b and len(a) == len(b) else "-"
    else:
        cuda_cell, vs = "skipped: no GPU", "-"
    bf16_cell = train_cell(results["bf16"]) if "bf16" in results else \
        ("skipped: no GPU" if dtype == "f32" else "n/a (a bf16 program)")
    say(f"| {name} | {cpu_cell} | {cuda_cell} | {vs} | {bf16_cell} |")

# The medium Llama against PyTorch eager.
say()
medium = os.path.join(args.programs, "medium_llama")
config_path = os.path.join(args.dir, "medium_llama_config.json")
try:
    import torch
    import transformers
except ImportError:
    torch = None
if not os.path.exists(medium):
    say("Medium Llama: not prepared")
elif torch is None:
    say("Medium Llama: skipped: no PyTorch")
else:
    torch.manual_seed(0)
    config = transformers.LlamaConfig.from_json_file(config_path)
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).eval()
    from safetensors.torch import save_file
    checkpoint = os.path.join(tmp, "model.safetensors")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, checkpoint)
    threads = min(16, os.cpu_count() or 1)
    seq = 128
    rows = []
    for batch in (1, 4):
        rng = np.random.default_rng(batch)
        ids = rng.integers(0, config.vocab_size, size=(batch, seq), dtype=np.int64)
        ids_path = os.path.join(tmp, f"medium_ids_{batch}.npy")
        np.save(ids_path, ids)
        keep = np.ones((batch, seq), bool)
        cpu, log = run(medium, ids_path, os.path.join(tmp, "mcpu.npy"), "cpu", checkpoint,
                       extra=["--threads", str(threads), "--bench", "3"])
        cpu_ms = float(re.search(r"median ([0-9.]+) ms", log).group(1)) if cpu is not None else None
        with torch.no_grad():
            ref_cpu = model(torch.from_numpy(ids)).logits.float().numpy()
        cpu_ref = rel(cpu, ref_cpu, keep)
        check(f"medium batch {batch}", cpu_ref, "CPU vs PyTorch (CPU)")
        row = {"batch": batch, "cpu_ms": cpu_ms, "cpu_ref": cpu_ref}
        if GPU:
            gpu, log = run(medium, ids_path, os.path.join(tmp, "mgpu.npy"), "cuda", checkpoint,
                           extra=["--bench", str(args.iters)])
            if gpu is None:
                say(f"<!-- medium cuda: {log[-400:]} -->")
            row["ours_ms"] = float(re.search(r"median ([0-9.]+) ms", log).group(1)) if gpu is not None else None
            # The same forward eagerly (the timed runs above replay a CUDA
            # graph where the forward could be captured).
            row["graph"] = ("captured" if gpu is not None and ", CUDA graph)" in log
                            else "not captured")
            eager, log = run(medium, ids_path, os.path.join(tmp, "meager.npy"), "cuda", checkpoint,
                             extra=["--bench", str(args.iters), "--cuda-graphs", "off"])
            row["ours_eager_ms"] = (float(re.search(r"median ([0-9.]+) ms", log).group(1))
                                    if eager is not None else None)
            logits16, log = run(medium, ids_path, os.path.join(tmp, "mbf16.npy"), "cuda", checkpoint,
                                extra=["--bench", str(args.iters), "--autocast", "bf16"])
            row["ours_bf16_ms"] = (float(re.search(r"median ([0-9.]+) ms", log).group(1))
                                   if logits16 is not None else None)
            # The bf16 program (tpc --dtype bf16): parameters and
            # activations bf16, as PyTorch's model in bf16.
            medium16 = os.path.join(args.programs, "medium_llama_bf16")
            program16, log = run(medium16, ids_path, os.path.join(tmp, "mprog16.npy"), "cuda",
                                 checkpoint, extra=["--bench", str(args.iters)]) \
                if os.path.exists(medium16) else (None, "not prepared")
            if program16 is None:
                say(f"<!-- medium bf16 program: {log[-400:]} -->")
            row["program16_ms"] = (float(re.search(r"median ([0-9.]+) ms", log).group(1))
                                   if program16 is not None else None)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            x = torch.from_numpy(ids).cuda()
            for dtype, key in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
                for impl in ("eager", "sdpa"):
                    m = transformers.LlamaForCausalLM(config).eval()
                    m.load_state_dict(model.state_dict())
                    try:
                        m.set_attn_implementation(impl)
                    except Exception:
                        m.config._attn_implementation = impl
                    m = m.to(device="cuda", dtype=dtype)
                    times = []
                    with torch.no_grad():
                        for i in range(args.iters + 3):
                            torch.cuda.synchronize()
                            t0 = time.perf_counter()
                            out = m(x).logits
                            torch.cuda.synchronize()
                            if i >= 3:
                                times.append(time.perf_counter() - t0)
                    row[f"torch_{key}_{impl}_ms"] = 1e3 * float(np.median(times))
                    if key == "f32" and impl == "eager":
                        ref_gpu = out.float().cpu().numpy()
                    if key == "bf16" and impl == "sdpa":
                        torch_bf16 = out.float().cpu().numpy()
                    del m
            row["gpu_ref"] = rel(gpu, ref_gpu, keep)
            row["bf16_ref"] = rel(logits16, ref_gpu, keep)
            row["torch_bf16_ref"] = rel(torch_bf16, ref_gpu, keep)
            row["program16_ref"] = rel(program16, ref_gpu, keep)
            check(f"medium batch {batch}", row["program16_ref"], "CUDA bf16 program vs PyTorch f32",
                  BF16_LOGITS_RTOL)
            check(f"medium batch {batch}", row["bf16_ref"], "CUDA bf16 autocast vs PyTorch f32",
                  BF16_LOGITS_RTOL)
            row["gpu_cpu"] = rel(gpu, cpu, keep) if cpu is not None else None
            check(f"medium batch {batch}", row["gpu_ref"], "CUDA vs PyTorch (GPU, f32)")
            check(f"medium batch {batch}", row["gpu_cpu"], "CUDA vs CPU")
        rows.append(row)
    say(f"Medium Llama (bench/forward's: hidden 512, 4 layers, 8/4 heads, MLP 1408, vocab 4096), seq {seq}, "
        f"forward median of {args.iters} (3 for the CPU backend); PyTorch {torch.__version__} eager, TF32 off:")
    if GPU:
        say("| batch | ours CUDA f32 (ms) | PyTorch f32 eager attn (ms) | PyTorch f32 sdpa (ms) | "
            "ratio ours / PyTorch f32 sdpa | PyTorch bf16 sdpa (ms) | ratio ours / PyTorch bf16 sdpa | "
            f"ours CPU {threads} threads (ms) | CUDA vs PyTorch | CUDA vs CPU | CPU vs PyTorch |")
        say("|---|---|---|---|---|---|---|---|---|---|---|")
        bf16_rows = []
        graph_rows = []
        for r in rows:
            ours = r["ours_ms"]
            f32, bf16 = r["torch_f32_sdpa_ms"], r["torch_bf16_sdpa_ms"]
            fmt = lambda v: "failed" if v is None else f"{v:.3f}"
            say(f"| {r['batch']} | {fmt(ours)} | {r['torch_f32_eager_ms']:.3f} | {f32:.3f} | "
                f"{'-' if ours is None else f'{ours / f32:.2f}'} | {bf16:.3f} | "
                f"{'-' if ours is None else f'{ours / bf16:.2f}'} | {fmt(r['cpu_ms'])} | "
                f"{cell(r['gpu_ref'])} | {cell(r['gpu_cpu'])} | {cell(r['cpu_ref'])} |")
            graph_rows.append(f"batch {r['batch']}: {fmt(ours)} ms with the graph ({r['graph']}), "
                              f"{fmt(r['ours_eager_ms'])} ms eagerly")
            ours16 = r["ours_bf16_ms"]
            ratio16 = "-" if ours16 is None else f"{ours16 / bf16:.2f}"
            prog16 = r["program16_ms"]
            ratio_prog16 = "-" if prog16 is None else f"{prog16 / bf16:.2f}"
            bf16_rows.append(f"| {r['batch']} | {fmt(ours16)} | {fmt(prog16)} | {bf16:.3f} | {ratio16} | "
                             f"{ratio_prog16} | {cell(r['bf16_ref'], BF16_LOGITS_RTOL)} | "
                             f"{cell(r['program16_ref'], BF16_LOGITS_RTOL)} | {r['torch_bf16_ref']:.1e} |")
        say()
        say("The same with bf16: ours with --autocast bf16 (linears in bf16, FP32 accumulation, the rest FP32) "
            "and as a bf16 program (tpc --dtype bf16: parameters and activations bf16), PyTorch's model in "
            "bf16; logits against PyTorch's f32:")
        say("| batch | ours CUDA autocast bf16 (ms) | ours CUDA bf16 program (ms) | PyTorch bf16 sdpa (ms) | "
            "ratio autocast | ratio bf16 program | autocast vs PyTorch f32 | bf16 program vs PyTorch f32 | "
            "PyTorch bf16 vs PyTorch f32 |")
        say("|---|---|---|---|---|---|---|---|---|")
        for line in bf16_rows:
            say(line)
        say()
        say("The f32 forward above replays a CUDA graph (--cuda-graphs, the default with --bench) where it "
            "could be captured; the same eagerly (--cuda-graphs off): " + "; ".join(graph_rows))
    else:
        say("| batch | ours CPU (ms) | CPU vs PyTorch | CUDA |")
        say("|---|---|---|---|")
        for r in rows:
            say(f"| {r['batch']} | {r['cpu_ms']:.3f} | {cell(r['cpu_ref'])} | skipped: no GPU |")

# The medium Llama's training step against PyTorch eager on the GPU.
train_exe = os.path.join(args.programs, "medium_llama_train")
if GPU and torch is not None and os.path.exists(train_exe) and os.path.exists(medium):
    say()
    batch, seq, steps = 4, 128, 8
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, config.vocab_size, size=(batch * steps, seq), dtype=np.int64)
    tokens_path = os.path.join(tmp, "medium_tokens.npy")
    np.save(tokens_path, tokens)
    def train_ours(extra, exe=train_exe, losses=None):
        """{ms per step (median of steps 3..), step-1 loss} of our program;
        every step's loss appended to `losses` when given."""
        if not os.path.exists(exe):
            return None, None
        r = subprocess.run([exe, "--train", "--data", tokens_path, "--steps", str(steps),
                            "--micro-batch", str(batch), "--grad-accum", "1", "--lr", "1e-3",
                            "--device", "cuda", "--weights", checkpoint] + extra,
                           capture_output=True, text=True, timeout=600)
        found = re.findall(r"step (\d+) loss ([0-9.eE+-]+) grad_norm \S+ tokens/s ([0-9.]+)", r.stdout)
        if r.returncode != 0 or len(found) != steps:
            failures.append(f"medium Llama training on the GPU {extra}")
            say(f"<!-- medium train {extra}: {(r.stdout + r.stderr)[-500:]} -->")
            return None, None
        if losses is not None:
            losses.extend(float(l) for _, l, _ in found)
        return (float(np.median([1e3 * batch * seq / float(t) for _, _, t in found[2:]])),
                float(found[0][1]))

    # From step 2 on each micro-batch replays a CUDA graph (--cuda-graphs,
    # the default): every step's loss as the eager run's.
    graph_losses, eager_losses = [], []
    ours_ms, ours_loss = train_ours([], losses=graph_losses)
    eager_ms, _ = train_ours(["--cuda-graphs", "off"], losses=eager_losses)
    graph_rel = None
    if len(graph_losses) == steps and len(eager_losses) == steps:
        graph_rel = max(abs(a - b) / abs(b) for a, b in zip(graph_losses, eager_losses))
    if graph_rel is None or graph_rel > 1e-4:
        failures.append("medium Llama training with CUDA graphs vs eagerly (every step's loss)")
    ours16_ms, ours16_loss = train_ours(["--autocast", "bf16"])
    prog16_ms, prog16_loss = train_ours([], os.path.join(args.programs, "medium_llama_train_bf16"))
    torch_ms, torch_loss = {}, None
    for dtype, key in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        m = transformers.LlamaForCausalLM(config)
        m.load_state_dict(model.state_dict())
        try:
            m.set_attn_implementation("sdpa")
        except Exception:
            pass
        m = m.to(device="cuda", dtype=dtype).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
        times = []
        for step in range(steps):
            x = torch.from_numpy(tokens[step * batch:(step + 1) * batch]).cuda()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = m(x).logits
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            if step == 0 and key == "f32":
                torch_loss = loss.item()
        torch_ms[key] = 1e3 * float(np.median(times[2:]))
        del m, opt
    loss_rel = abs(ours_loss - torch_loss) / abs(torch_loss) if ours_loss is not None else None
    if loss_rel is None or loss_rel > 1e-5:
        failures.append("medium Llama step-1 loss on the GPU vs PyTorch")
    fmt = lambda v: "failed" if v is None else f"{v:.2f}"
    say(f"Medium Llama training step (AdamW, batch {batch} x seq {seq}, median of steps 3-{steps}), "
        "PyTorch eager with sdpa attention, TF32 off:")
    say("| ours CUDA f32 (ms/step) | PyTorch f32 (ms/step) | ratio | ours autocast bf16 (ms/step) | "
        "ours bf16 program (ms/step) | PyTorch bf16 (ms/step) | ratio autocast | ratio bf16 program | "
        "step-1 loss ours / PyTorch f32 | ours autocast, bf16 program step-1 loss |")
    say("|---|---|---|---|---|---|---|---|---|---|")
    ratio_f32 = "-" if ours_ms is None else f"{ours_ms / torch_ms['f32']:.2f}"
    ratio_bf16 = "-" if ours16_ms is None else f"{ours16_ms / torch_ms['bf16']:.2f}"
    ours_text = "-" if ours_loss is None else f"{ours_loss:.6f}"
    rel_text = "-" if loss_rel is None else f"{loss_rel:.1e}"
    loss16 = "-" if ours16_loss is None else f"{ours16_loss:.6f}"
    loss_prog16 = "-" if prog16_loss is None else f"{prog16_loss:.6f}"
    ratio_prog16 = "-" if prog16_ms is None else f"{prog16_ms / torch_ms['bf16']:.2f}"
    say(f"| {fmt(ours_ms)} | {torch_ms['f32']:.2f} | {ratio_f32} | {fmt(ours16_ms)} | {fmt(prog16_ms)} | "
        f"{torch_ms['bf16']:.2f} | {ratio_bf16} | {ratio_prog16} | {ours_text} / {torch_loss:.6f} "
        f"({rel_text}) | {loss16}, {loss_prog16} |")
    graph_text = "failed" if graph_rel is None else f"{graph_rel:.1e}"
    say(f"Ours f32 above replays each micro-batch as a CUDA graph from step 2 on; eagerly "
        f"(--cuda-graphs off): {fmt(eager_ms)} ms/step; the {steps} steps' losses differ by at most "
        f"{graph_text} (relative; bound 1e-4).")

# The model of the size users train (bench/large), against PyTorch eager
# and torch.compile.
say()
sys.path.insert(0, os.path.join(args.root, "bench", "large"))
import large  # noqa: E402
large.measure(args.dir, args.programs, GPU, say, failures, torch_compile=not args.no_torch_compile)

say()
say("Not run here: NCCL with more than one GPU (one GPU holds one rank; the MPI tests cover the "
    "collective schedule).")
say()
if failures:
    say(f"device-check: {len(failures)} check(s) failed:")
    for f in failures:
        say(f"  {f}")
else:
    say("device-check: every check passed" + ("" if GPU else " (CPU side only: no GPU)"))
with open(os.path.join(args.dir, "device-check.log"), "w") as f:
    f.write("\n".join(lines) + "\n")
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failures else 0)
