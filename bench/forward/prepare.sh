# shellcheck shell=bash
# Sourced by bench/forward's scripts: sets up the model stack, builds tpc
# and the runtime, makes the medium Llama once, and defines $root, $work
# (BENCH_DIR, or build/bench/forward) and make_ids.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/forward}
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc tprt tprt_main >/dev/null
[ -f "$work/model/model.onnx" ] || "$root/.venv/bin/python" "$root/bench/forward/make_model.py" "$work/model"

# make_ids BATCH: writes $work/ids_bBATCH.npy, BATCH x 128 token ids (seeded
# by the batch, so every script times the same input), and sets $ids to it.
make_ids() {
  ids="$work/ids_b$1.npy"
  "$root/.venv/bin/python" -c "import numpy as np; np.save('$ids', np.random.default_rng($1).integers(0, 4096, ($1, 128)).astype(np.int64))"
}
