#!/usr/bin/env bash
# The main job on the bundled tiny Llama (test/models/llama, a TorchScript
# export of transformers' LlamaForCausalLM): compile it with tpc, run the
# executable on the reference inputs and print the greedy next tokens and
# the largest difference from PyTorch's logits.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
model=$root/test/models/llama/ts_fold.onnx
ref=$root/test/models/llama/ref
out=$build/demo

echo "== tpc $model -o $out"
"$build/bin/tpc" "$model" --hf-config "$root/test/models/llama/config.json" -o "$out"
grep -o 'tp.config = {[^}]*}' "$out/model.mlir"
echo "== $out/model --input input_ids_b3_s12_pad.npy --attention-mask attention_mask_b3_s12_pad.npy"
"$out/model" --input "$ref/input_ids_b3_s12_pad.npy" \
  --attention-mask "$ref/attention_mask_b3_s12_pad.npy" --output "$out/logits.npy"
"$root/.venv/bin/python" - "$out/logits.npy" "$ref" <<'PY'
import sys
import numpy as np
logits = np.load(sys.argv[1])
ref = np.load(sys.argv[2] + "/logits_b3_s12_pad.npy")
mask = np.load(sys.argv[2] + "/attention_mask_b3_s12_pad.npy").astype(bool)
for b in range(logits.shape[0]):
    last = np.nonzero(mask[b])[0][-1]
    print(f"row {b}: greedy next token {int(logits[b, last].argmax())} "
          f"(PyTorch: {int(ref[b, last].argmax())})")
diff = np.abs(logits - ref)[mask].max()
print(f"max |logits - PyTorch| over kept positions: {diff:.3e} "
      f"(max |ref| {np.abs(ref[mask]).max():.3f})")
PY
