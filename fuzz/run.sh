#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs
# one of them for SECONDS on a corpus seeded from the test models.
#
#   fuzz/run.sh TARGET SECONDS     TARGET: npy, import, raise, plans
#
# Findings land in build-fuzz/findings/TARGET/ (crash-*, leak-*, timeout-*);
# each becomes a regression test under test/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${1:?usage: fuzz/run.sh npy|import|raise|plans SECONDS}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

"$root/scripts/setup.sh" --fuzz
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DTPOPT_FUZZ=ON >/dev/null
ninja -C "$build" -j"${JOBS:-2}" "tp-fuzz-$target"

corpus="$build/corpus/$target"
findings="$build/findings/$target"
mkdir -p "$corpus" "$findings"
# Seeds, named after their path (the test models share file names).
seed() {
  for f in "$@"; do
    [ -e "$f" ] && cp "$f" "$corpus/$(echo "${f#"$root"/}" | tr / _)"
  done
  return 0
}
case "$target" in
npy) seed "$root"/test/models/*/ref/*.npy ;;
import | raise) seed "$root"/test/models/*/ts_fold.onnx "$root"/test/models/*/dynamo.onnx ;;
plans) seed "$root"/test/models/*/config.json "$root"/test/e2e/Inputs/*.json "$root"/fuzz/corpus/plans/* ;;
*)
  echo "fuzz/run.sh: unknown target '$target'" >&2
  exit 2
  ;;
esac

export ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$build/bin/tp-fuzz-$target" -max_total_time="$seconds" -max_len=1048576 \
  -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$findings/" "$corpus"
