#!/usr/bin/env bash
# The main job on the bundled tiny Llama (test/models/llama, a TorchScript
# export of transformers' LlamaForCausalLM): compile it with tpc for one rank
# and, with the built-in Llama TP plan, for two; run the first directly and
# the second as two MPI ranks on the reference inputs; print the greedy next
# tokens, the largest difference from PyTorch's logits and the plan summary.
# Then compile the training step at tp=2 and train 8 AdamW steps on the same
# 4 sequences (2 micro-batches of 2), printing the loss as it falls.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
model=$root/test/models/llama/ts_fold.onnx
ref=$root/test/models/llama/ref
out=$build/demo
inputs=(--input "$ref/input_ids_b3_s12_pad.npy"
  --attention-mask "$ref/attention_mask_b3_s12_pad.npy")

compare() {
  "$root/.venv/bin/python" - "$1" "$ref" <<'PY'
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
}

echo "== tpc $model -o $out/tp1"
"$build/bin/tpc" "$model" --hf-config "$root/test/models/llama/config.json" \
  -o "$out/tp1"
grep -o 'tp.config = {[^}]*}' "$out/tp1/model.mlir"
echo "== $out/tp1/model (one process)"
"$out/tp1/model" "${inputs[@]}" --output "$out/tp1/logits.npy"
compare "$out/tp1/logits.npy"

echo "== tpc $model --tp 2 --report -o $out/tp2"
"$build/bin/tpc" "$model" --hf-config "$root/test/models/llama/config.json" \
  --tp 2 --report -o "$out/tp2"
echo "   (placements and collectives: $out/tp2/plan-report.md)"
echo "== mpirun -np 2 $out/tp2/model"
mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$out/tp2/model" "${inputs[@]}" --output "$out/tp2/logits.npy"
compare "$out/tp2/logits.npy"

echo "== tpc $model --train --tp 2 -o $out/train"
"$build/bin/tpc" "$model" --hf-config "$root/test/models/llama/config.json" \
  --train --tp 2 -o "$out/train"
"$root/.venv/bin/python" - "$root/test/models/llama/train" "$out/train" <<'PY'
import sys
import numpy as np
src, out = sys.argv[1], sys.argv[2]
np.save(out + "/tokens.npy", np.load(src + "/tokens.npy")[:4])
np.save(out + "/mask.npy", np.load(src + "/mask.npy")[:4])
PY
echo "== mpirun -np 2 $out/train/model --train (8 steps on the same 4 sequences)"
mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$out/train/model" --train --data "$out/train/tokens.npy" \
  --data-mask "$out/train/mask.npy" --steps 8 --micro-batch 2 --grad-accum 2 \
  --lr 1e-2 --save "$out/train/checkpoint" --log "$out/train/train.jsonl"
echo "   (weights: $out/train/checkpoint/model.safetensors; log: $out/train/train.jsonl)"
