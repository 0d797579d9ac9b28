#!/usr/bin/env bash
# The main job on the bundled tiny Llama (test/models/llama): import the
# TorchScript export and print the raised tp IR with its configuration.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
model=$root/test/models/llama/ts_fold.onnx

echo "== tp-opt $model --tp-raise-onnx"
"$build/bin/tp-opt" "$model" --tp-raise-onnx --tp-verify-params
