#!/usr/bin/env bash
# Runs every test through ctest (the lit suite and the unit tests), then
# prints one closing line with the individual test counts.
set -uo pipefail
build=${1:-build}
results="$build/test-results"
rm -rf "$results" && mkdir -p "$results"
export TPOPT_TEST_RESULTS="$(cd "$results" && pwd)"

ctest --test-dir "$build" --output-on-failure
status=$?

"$(dirname "$0")/summarize-tests.py" "$results"
summary=$?
if [ $status -ne 0 ] || [ $summary -ne 0 ]; then
  exit 1
fi
