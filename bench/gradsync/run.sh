#!/usr/bin/env bash
# bench/gradsync: the replica-gradient synchronization of the generated
# optimizer step (tprt::grad_bucket_all_reduce per bucket, buckets planned
# as tp-replica-grad-sync plans them) against one raw MPI_Allreduce of the
# same FP32 bytes, packing against memcpy, and the cast of bf16 gradients
# into their FP32 buffers, on two ranks in one run. Needs about 15 GiB of
# memory at full size (2 GiB of gradients per rank, their bf16 copies, and
# the raw and packed copies). Arguments go to the benchmark:
# --bucket-mib M (default 256), --rounds R (default 5), --scale S,
# --device cuda (on two GPUs).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ninja -C "$root/build" tprt-gradsync-bench >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$root/build/bin/tprt-gradsync-bench" "$@"
