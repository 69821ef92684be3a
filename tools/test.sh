#!/usr/bin/env bash
# Set everything up (tools/bootstrap.sh) and run the whole test suite through CTest.
# Extra arguments go to ctest (e.g. -R checkpoint, -L python).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash tools/bootstrap.sh
cd build
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
