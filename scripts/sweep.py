#!/usr/bin/env python3
"""Random model configurations compiled and run against PyTorch: a search
for the configurations the committed test models do not cover.

For each (architecture, seed) it builds a tiny HF model from a random
config (heads, KV heads, head_dim, hidden size, layers, MLP width,
vocabulary, ties, biases, Gemma3 layer types and windows, NemotronH block
patterns and Mamba sizes), exports it (TorchScript folded, and dynamo for
some seeds), and writes PyTorch's logits and a 3-step AdamW run (LoRA
adapter and its run with --lora) into WORK/NAME, as test/models does. Then
it compiles each model at random tensor-parallel degrees and options with
tpc and compares the forward's logits and the training run with
test/e2e/compare_logits.py and compare_training.py (their default bounds).

    scripts/setup.sh --models
    .venv/bin/python scripts/sweep.py --seeds 1-8 [--arch llama,gemma3]
        [--runs 3] [--lora] [--work /tmp/tp-sweep] [--seed 0]

Prints a line per run; a diagnostic that refuses a configuration (a tp that
does not divide the heads, SP on NemotronH) is listed apart from failures.
Exits 1 when a comparison failed or a compile failed otherwise. Not part of
CI: it needs torch and transformers, and minutes per model. A failure may
be the model's conditioning rather than a bug (AdamW's first update turns
gradient elements near its eps into weight differences): compare against
PyTorch in float64 before suspecting the compiler (docs/development.md).
"""
import argparse
import os
import random
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))

# Options drawn per run.
OPTIONS = ["", "--sp", "--recompute", "--sp --recompute", "--layer-loops",
           "--fuse-siblings", "--overlap-all-reduces", "--async-tp --sp",
           "--save-attention-stats=false", "--plan default", "--dp 2",
           "--dp 2 --zero 1", "--dp 2 --zero 2 --sp", "--dp 2 --zero 3"]
# Options of the training step only (data parallelism: 2 copies, as the
# references' 2 micro-batches a step allow).
TRAIN_ONLY = re.compile(r"--recompute|--dp \d+|--zero \d+")
# Messages that refuse a configuration on purpose.
REFUSALS = re.compile(r"cannot give each of|not divisible by tp|does not "
                      r"support sequence parallelism|needs --tp 2 or more")


def random_config(arch, rng):
    import transformers
    heads = rng.choice([2, 4, 6, 8])
    kv = rng.choice([d for d in range(1, heads + 1) if heads % d == 0])
    head_dim = rng.choice([8, 16, 32])
    layers = rng.choice([1, 2, 3])
    common = dict(vocab_size=rng.choice([128, 160, 256]),
                  hidden_size=heads * head_dim if arch == "qwen2"
                  else rng.choice([32, 48, 64, 96]),
                  num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv,
                  intermediate_size=rng.choice([64, 96, 128, 160]),
                  rms_norm_eps=rng.choice([1e-6, 1e-5]),
                  tie_word_embeddings=rng.random() < 0.3)
    if arch == "llama":
        return transformers.LlamaForCausalLM, transformers.LlamaConfig(
            head_dim=head_dim, rope_theta=rng.choice([1e4, 5e5]),
            attention_bias=rng.random() < 0.3, **common)
    if arch == "qwen2":
        return transformers.Qwen2ForCausalLM, transformers.Qwen2Config(
            rope_theta=1e6, **common)
    if arch == "qwen3":
        return transformers.Qwen3ForCausalLM, transformers.Qwen3Config(
            head_dim=head_dim, rope_theta=1e6, **common)
    if arch == "gemma3":
        common["tie_word_embeddings"] = True
        return transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig(
            head_dim=head_dim,
            query_pre_attn_scalar=rng.choice([head_dim, 2 * head_dim]),
            sliding_window=rng.choice([3, 4, 6]),
            layer_types=[rng.choice(["sliding_attention", "full_attention"])
                         for _ in range(layers)],
            rope_parameters={
                "sliding_attention": {"rope_type": "default",
                                      "rope_theta": 1e4},
                "full_attention": {"rope_type": "default",
                                   "rope_theta": 1e6}},
            **common)
    if arch == "nemotron_h":
        mamba_heads = rng.choice([2, 4, 8])
        del common["num_hidden_layers"], common["rms_norm_eps"]
        return transformers.NemotronHForCausalLM, transformers.NemotronHConfig(
            layers_block_type=[rng.choice(["mamba", "attention", "mlp"])
                               for _ in range(layers + 1)],
            head_dim=head_dim, mamba_num_heads=mamba_heads,
            mamba_head_dim=rng.choice([8, 16]),
            n_groups=rng.choice([g for g in (1, 2, 4)
                                 if mamba_heads % g == 0]),
            ssm_state_size=rng.choice([4, 8]), conv_kernel=4, chunk_size=8,
            use_mamba_kernels=False, layer_norm_epsilon=1e-5, **common)
    raise SystemExit(f"unknown architecture {arch}")


def make_model(name, arch, seed, work, lora):
    """The model's exports and PyTorch references in WORK/NAME (kept when
    there); False when transformers refuses the drawn config."""
    import numpy as np
    import torch
    import generate
    import make_train
    rng = random.Random(seed)
    try:
        cls, config = random_config(arch, rng)
    except ValueError as e:  # e.g. a hidden size the heads do not divide
        print(f"{name}: config refused by transformers: {e}")
        return False
    generate.ARCHS[name] = lambda: (config, cls)
    generate.WHOLE_VOCAB_IDS.add(name)
    d = os.path.join(work, name)
    if not os.path.exists(os.path.join(d, "train", "reference.json")):
        os.makedirs(os.path.join(d, "ref"), exist_ok=True)
        _, hf = generate.build(name)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(config.to_json_string())
        generate.export_folded_and_dynamo(
            generate.LogitsOnly(hf).eval(), d,
            dynamo_opsets=(None,) if rng.random() < 0.4 else ())
        ids, mask = generate.inputs_for((3, 12), True, 11, config.vocab_size)
        with torch.no_grad():
            logits = hf(input_ids=ids, attention_mask=mask,
                        use_cache=False).logits
        for what, a in [("input_ids", ids), ("attention_mask", mask),
                        ("logits", logits)]:
            np.save(os.path.join(d, "ref", f"{what}_b3_s12_pad.npy"),
                    a.numpy())
        make_train.train(name, work)
    if lora and not os.path.exists(os.path.join(d, "train_lora")):
        import make_lora
        make_lora.make_lora(name, d)
        make_train.train(name, work, lora=True)
    return True


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def check(name, d, tp, options, onnx, lora, out):
    """One configuration: compile and compare the forward, then training.
    Returns the lines to print and whether any failed."""
    tpc = os.path.join(ROOT, "build", "bin", "tpc")
    e2e = os.path.join(ROOT, "test", "e2e")
    adapter = ["--lora-adapter", os.path.join(d, "lora")] if lora else []
    dp = 2 if "--dp 2" in options else 1
    label = f"{name} tp={tp} {options} {onnx}{' lora' if lora else ''}"
    lines, failed = [], False
    for train in (False, True):
        flags = (options if train else TRAIN_ONLY.sub("", options)).split()
        n = tp * dp if train else tp
        ranks = ["--mpirun", str(n)] if n > 1 else []
        if train and dp > 1:
            ranks += ["--dp", str(dp)]
        exe_dir = os.path.join(out, "train" if train else "forward")
        rc, text = run([tpc, os.path.join(d, onnx), "--tp", str(tp)] +
                       (["--train"] if train else []) + flags + adapter +
                       ["-o", exe_dir])
        if rc == 0:
            if train:
                rc, text = run([sys.executable,
                                os.path.join(e2e, "compare_training.py"),
                                os.path.join(exe_dir, "model"),
                                os.path.join(d, "train_lora" if lora
                                             else "train")] + ranks)
            else:
                ref = os.path.join(d, "ref")
                rc, text = run(
                    [sys.executable, os.path.join(e2e, "compare_logits.py"),
                     os.path.join(exe_dir, "model"),
                     "--ids", os.path.join(ref, "input_ids_b3_s12_pad.npy"),
                     "--mask", os.path.join(ref, "attention_mask_b3_s12_pad.npy"),
                     "--logits", os.path.join(d, "lora" if lora else "ref",
                                              "logits_b3_s12_pad.npy")] + ranks)
            what = "FAIL" if rc else "ok"
        elif REFUSALS.search(text):
            what = "refused"
        else:
            what = "COMPILE FAIL"
        failed |= what in ("FAIL", "COMPILE FAIL")
        detail = [l for l in text.splitlines() if l.startswith("FAIL")]
        last = text.splitlines()[-1] if text else ""
        if what == "refused":
            last = next(l for l in text.splitlines() if REFUSALS.search(l))
        lines.append(f"{what}: {label} {'train' if train else 'forward'}: "
                     f"{'; '.join(detail) or last}")
        if what == "refused":
            break
    return lines, failed


def seeds_of(spec):
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="1-4", help="model seeds, e.g. 1-8")
    p.add_argument("--arch", default="llama,qwen2,qwen3,gemma3,nemotron_h")
    p.add_argument("--runs", type=int, default=3,
                   help="configurations per model")
    p.add_argument("--lora", action="store_true",
                   help="LoRA adapters (PEFT) instead of full training")
    p.add_argument("--work", default="/tmp/tp-sweep")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the configurations drawn")
    args = p.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    rng = random.Random(args.seed)
    failures = 0
    for seed in seeds_of(args.seeds):
        for arch in args.arch.split(","):
            name = f"{arch}_r{seed}"
            if not make_model(name, arch, seed, args.work, args.lora):
                continue
            d = os.path.join(args.work, name)
            for k in range(args.runs):
                tp = rng.choice([1, 2, 3, 4] if k == 0 else [2, 3, 4])
                options = rng.choice(OPTIONS)
                if tp == 1:
                    options = options.replace("--sp", "").strip()
                onnx = ("dynamo.onnx" if os.path.exists(
                    os.path.join(d, "dynamo.onnx")) and rng.random() < 0.4
                    else "ts_fold.onnx")
                out = os.path.join(args.work, "out", name, str(k))
                lines, failed = check(name, d, tp, options, onnx, args.lora,
                                      out)
                if tp > 1 and any("--allow-uneven" in l for l in lines):
                    # The same draw with uneven splits allowed.
                    lines, failed = check(name, d, tp,
                                          options + " --allow-uneven", onnx,
                                          args.lora, out)
                failures += failed
                print("\n".join(lines), flush=True)
    print(f"sweep: {failures} configuration(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
