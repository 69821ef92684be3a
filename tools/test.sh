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
# FRUGAL_FUZZ_SECONDS per target (default 10; 0 skips it), in its own clang build (build-fuzz/).
fuzz_seconds="${FRUGAL_FUZZ_SECONDS:-10}"
if [ $# -eq 0 ] && [ "$fuzz_seconds" != 0 ]; then
  cd "$root"
  bash tools/fuzz.sh "$fuzz_seconds" || rc=1
fi
exit $rc
