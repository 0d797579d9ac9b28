#!/usr/bin/env bash
# bench/compile end to end: set up the model stack, build tpc, write the
# 70B-shaped graphs (sparse weights: ~260 GiB apparent at 80 layers, nothing
# on disk) in both forms and time the pipeline at tp=1 and tp=8 (--emit cpp),
# then the whole build of the executable for the fused form (--emit exe).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${BENCH_DIR:-$root/build/bench/compile}
"$root/scripts/setup.sh" --models
ninja -C "$root/build" tpc >/dev/null
status=0
for form in dynamo fused; do
  for tp in 1 8; do
    "$root/.venv/bin/python" "$root/bench/compile/run.py" "$root/build/bin/tpc" \
      "$work" --form "$form" --tp "$tp" "$@" || status=1
  done
done
# The whole build of the executable (tpc, the host compiler, the link), of
# the forward and of the training program.
for tp in 1 8; do
  "$root/.venv/bin/python" "$root/bench/compile/run.py" "$root/build/bin/tpc" \
    "$work" --form fused --emit exe --tp "$tp" "$@" || status=1
done
"$root/.venv/bin/python" "$root/bench/compile/run.py" "$root/build/bin/tpc" \
  "$work" --form fused --emit exe --train --tp 8 "$@" || status=1
exit $status
