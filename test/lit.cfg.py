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
    [ToolSubst(t, unresolved="fatal") for t in ["tp-opt", "tp-translate", "tpc"]],
    [config.tp_tools_dir])

config.substitutions.append(("%tp_python", config.python_executable))
config.substitutions.append(("%tp_src", config.tp_src_root))
config.substitutions.append(("%shared", os.path.join(
    os.path.dirname(config.tp_src_root), "shared")))
