#!/usr/bin/env bash
# bench/gemm: single-core sgemm of the runtime's GEMM library (oneDNN)
# against OpenBLAS: the machine's peak, the forward's projection shapes
# alone, and the forward's projections in order (their fraction of the
# peak), then onnxruntime's MatMul (MLAS, what bench/forward's peer runs)
# on the same shapes when the model stack is set up. Arguments go to the
# benchmark: --hidden, --layers, --heads, --kv-heads, --head-dim, --mlp,
# --vocab, --rows, --rounds, --threads (1 by default). The runtime's column
# is oneDNN (TPRT_GEMM=onednn) unless TPRT_GEMM says otherwise (`mkl`:
# what the runtime itself runs f32 products on by default on Intel CPUs;
# below AVX-512 elsewhere it is OpenBLAS).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ninja -C "$root/build" tprt-gemm-bench >/dev/null
TPRT_GEMM=${TPRT_GEMM:-onednn} OMP_WAIT_POLICY=passive "$root/build/bin/tprt-gemm-bench" "$@"
if [ -x "$root/.venv/bin/python" ] && "$root/.venv/bin/python" -c "import onnxruntime" 2>/dev/null; then
  echo
  OMP_WAIT_POLICY=passive "$root/.venv/bin/python" "$root/bench/gemm/ort_matmul.py"
fi
