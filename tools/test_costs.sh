#!/usr/bin/env bash
# Rewrites tests/ctest_costs.txt from the timings CTest kept of the last full run in build/
# (CTest's own file, Testing/Temporary/CTestCostData.txt): the seconds of every test file that
# took 3 s or more, slowest first. A fresh clone has no timings, and CTest then starts its tests
# in the order these costs give (tests/CMakeLists.txt): the long ones first, not last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data="$root/build/Testing/Temporary/CTestCostData.txt"
[ -f "$data" ] || { echo "tools/test_costs.sh: $data missing (run tools/test.sh first)" >&2; exit 1; }
{
  echo "# Seconds each test file takes (CTest's running mean, ctest -j3 on 2 cores), slowest first: the order"
  echo "# CTest starts them in on a fresh clone, which has no timings of its own yet (tests/CMakeLists.txt)."
  echo "# Refresh after a full run: tools/test_costs.sh"
  # CostData's lines: name, runs, mean seconds; a "---" line starts the list of failed tests.
  awk '$0 == "---" {exit} NF == 3 && $3 >= 3 {printf "%s %.0f\n", $1, $3}' "$data" | sort -k2 -rn
} >"$root/tests/ctest_costs.txt"
echo "tools/test_costs.sh: wrote tests/ctest_costs.txt ($(grep -vc '^#' "$root/tests/ctest_costs.txt") tests)"
