#!/usr/bin/env bash
# The long mode of the fault tests (docs/reliability.md): crash-and-resume trials with more
# kills than CI runs. CI runs 3 trials per case; this runs FRUGAL_CRASH_TRIALS (default 10).
#   bash tools/fault_trials.sh [TRIALS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export FRUGAL_CRASH_TRIALS="${1:-${FRUGAL_CRASH_TRIALS:-10}}"
exec build/bin/frugal_tests "[reliability]"
