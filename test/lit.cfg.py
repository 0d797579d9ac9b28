# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "TPOPT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit",
                   "compare_logits.py", "ort_reference.py",
                   "models", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tp_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["FileCheck", "not", "count", "split-file"], [config.llvm_tools_dir])
llvm_config.add_tool_substitutions(
    [ToolSubst(t, unresolved="fatal")
     for t in ["tp-opt", "tp-translate", "tpc", "tp-runtime-abi",
               "tp-pipeline-options"]],
    [config.tp_tools_dir])

config.substitutions.append(("%tp_python", config.python_executable))
config.substitutions.append(("%cxx", config.cxx_compiler))
config.substitutions.append(("%tp_src", config.tp_src_root))
config.substitutions.append(("%tp_obj", config.tp_obj_root))
# The shared fixtures live beside the checkout (../shared) or where
# TPOPT_SHARED points; without them the fixture tests are unsupported.
shared = os.environ.get("TPOPT_SHARED") or os.path.join(
    os.path.dirname(config.tp_src_root), "shared")
config.substitutions.append(("%shared", shared))
if os.path.isdir(os.path.join(shared, "fixtures")):
    config.available_features.add("shared-fixtures")
else:
    lit_config.note(f"no fixtures in {shared} (set TPOPT_SHARED): the "
                    "fixture tests are unsupported")

# A GPU the CUDA backend can use (the runtime built with it, nvidia-smi
# listing a device): the `gpu` tests run; elsewhere their CPU-side
# counterparts do.
import shutil
import subprocess
if (any(os.path.exists(os.path.join(config.tp_obj_root, "lib", lib))
         for lib in ("libtprt.a", "libtprt.so"))
        and shutil.which("nvidia-smi")
        and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0):
    config.available_features.add("gpu")

# The runtime links oneDNN and OpenBLAS and picks the f32 products' library
# when a program runs (TPRT_GEMM, runtime/src/cpu/Gemm.cpp).
if config.tp_both_gemms == "ON":
    config.available_features.add("both-gemms")
# ... and libxsmm for the packed weights' f32 linears (TPRT_GEMM=xsmm).
if config.tp_xsmm == "ON":
    config.available_features.add("xsmm")

# torch and transformers in the project's environment (scripts/setup.sh
# --models): the tests that build HF models or run tools/tp-export.
if subprocess.run([config.python_executable, "-c",
                   "import torch, transformers, onnxscript"],
                  capture_output=True).returncode == 0:
    config.available_features.add("torch")
