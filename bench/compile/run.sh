#!/usr/bin/env bash
# bench/compile end to end: build tpc, write the 70B-shaped graphs (sparse
# weights: ~330 GiB apparent, nothing on disk) and time the pipeline at tp=1
# and tp=8.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/compile}
"$root/scripts/setup.sh"
ninja -C "$root/build" tpc >/dev/null
"$root/.venv/bin/python" "$root/bench/compile/run.py" "$root/build/bin/tpc" "$work" "$@"
"$root/.venv/bin/python" "$root/bench/compile/run.py" "$root/build/bin/tpc" "$work" --tp 8 "$@"
