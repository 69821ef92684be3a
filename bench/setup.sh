# Sourced by every bench/*/run.sh: from the repository root, with everything built, sets
# `threads` (first argument, default: all cores) and a scratch folder `tmp` removed on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FRUGAL_TEST_DEPS=1 bash tools/bootstrap.sh >/dev/null
threads=${1:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
