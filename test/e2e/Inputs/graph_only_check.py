#!/usr/bin/env python3
"""The graph-only export of test model ARCH against PyTorch's trained
weights: an HF directory OUT/ARCH/hf (config.json and ARCH/train/
final.safetensors in two shards), `tpc graph_only.onnx --weights` at tp=2,
the program's logits against PyTorch's (ARCH/train/final_logits_*.npy).

    graph_only_check.py TPC MODELS OUT ARCH"""
import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
tpc, models, out, arch = sys.argv[1:5]
src = os.path.join(models, arch)
hf = os.path.join(out, arch, "hf")
exe = os.path.join(out, arch, "tp2")
os.makedirs(hf, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), hf)
subprocess.run([sys.executable, os.path.join(here, "shard_checkpoint.py"),
                os.path.join(src, "train", "final.safetensors"), hf, "2"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([tpc, os.path.join(src, "graph_only.onnx"), "--weights", hf,
                "--tp", "2", "-o", exe], check=True)
ref = os.path.join(src, "ref")
sys.exit(subprocess.run(
    [sys.executable, os.path.join(here, "..", "compare_logits.py"),
     os.path.join(exe, "model"), "--mpirun", "2",
     "--ids", os.path.join(ref, "input_ids_b3_s12_pad.npy"),
     "--mask", os.path.join(ref, "attention_mask_b3_s12_pad.npy"),
     "--logits", os.path.join(src, "train", "final_logits_b3_s12_pad.npy"),
     "--report-reads"]).returncode)
