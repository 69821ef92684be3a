#!/usr/bin/env bash
# Set everything up (tools/bootstrap.sh) and run the whole test suite through CTest.
# Extra arguments go to ctest (e.g. -R checkpoint, -L python).
# Cases that need what this machine lacks (a CUDA device) are reported as skipped, not passed
# (tests/support/skip.h); their count and reasons follow CTest's closing lines.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
FRUGAL_TEST_DEPS=1 bash tools/bootstrap.sh
cd build
rc=0
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@" || rc=$?
log=Testing/Temporary/LastTest.log
if [ -f "$log" ]; then
  grep '^SKIPPED: ' "$log" | sort | uniq -c | sed 's/^ *\([0-9]*\) SKIPPED: /skipped: \1 test(s): /' || true
fi
# The whole suite (no ctest arguments) also fuzzes each reader briefly: tools/fuzz.sh with
# FRUGAL_FUZZ_RUNS inputs per target from a fixed seed (default 400, a few seconds each; 0
# skips it), in its own clang build (build-fuzz/). A fixed count and seed, not a time: how far
# it gets does not depend on the machine's speed.
fuzz_runs="${FRUGAL_FUZZ_RUNS:-400}"
if [ $# -eq 0 ] && [ "$fuzz_runs" != 0 ]; then
  cd "$root"
  FRUGAL_FUZZ_RUNS="$fuzz_runs" bash tools/fuzz.sh 1 || rc=1
fi
exit $rc
