#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run tp-opt:
# Debian packages by name (apt), and the test-time Python packages pinned in
# requirements.txt (and the header-only wheels of requirements-headers.txt)
# inside the project-local virtual environment .venv/.
#
# Idempotent: when every package is present it runs no apt-get update and no
# pip download, and finishes in about a second.
#
#   scripts/setup.sh            system packages + .venv with requirements.txt
#   scripts/setup.sh --models   also requirements-models.txt (torch, transformers)
#   scripts/setup.sh --fuzz     also clang-14 and libFuzzer (fuzz/run.sh)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
with_models=0
with_fuzz=0
for arg in "$@"; do
  case "$arg" in
  --models) with_models=1 ;;
  --fuzz) with_fuzz=1 ;;
  *)
    echo "setup.sh: unknown argument '$arg'" >&2
    exit 2
    ;;
  esac
done

apt_packages=(
  # Compiler toolchain and build system.
  g++ cmake ninja-build pkg-config
  # LLVM/MLIR 22.1 (libMLIR.so, headers, TableGen, lit, FileCheck, not, split-file).
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # ONNX protobuf schema.
  libonnx-dev libprotobuf-dev protobuf-compiler
  # Runtime: GEMM (oneDNN; OpenBLAS where oneDNN is absent; libxsmm's
  # kernels for packed weights below AVX-512) and MPI.
  libdnnl-dev libopenblas-dev libopenblas-openmp-dev libxsmm-dev
  libopenmpi-dev openmpi-bin
  # Unit tests.
  libgtest-dev
  # Python for the test oracles (onnxruntime) and lit.
  python3 python3-venv
)
if ((with_fuzz)); then
  # libFuzzer and the sanitizer runtimes (fuzz/run.sh).
  apt_packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Project-local virtual environment on Debian's python3 (the interpreter lit uses).
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi

# Install a requirements file only when it changed since the last install.
install_reqs() {
  local req="$1" stamp="$venv/.$(basename "$1").sha256"
  local sum
  sum=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    return
  fi
  echo "setup.sh: pip install -r $(basename "$req")"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${@:2}" -r "$req"
  echo "$sum" >"$stamp"
}
install_reqs "$root/requirements.txt"
# C++ headers only: the wheels' Python dependencies are not used.
install_reqs "$root/requirements-headers.txt" --no-deps
if ((with_models)); then
  install_reqs "$root/requirements-models.txt"
fi
