#!/usr/bin/env bash
# Set everything up (tools/bootstrap.sh), turn Debian's fortunes corpus into byte-level token
# shards with `frugal prepare-text`, and train a small char-level GPT on it; the run directory
# and a few sampled lines are printed at the end. Extra arguments go to `frugal train`
# (e.g. --set train.max_steps=200).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# The CLI is all the main job needs: the tests are built by tools/test.sh.
FRUGAL_BUILD_TARGET=frugal_cli bash tools/bootstrap.sh
if [ ! -f data/fortunes.bin ]; then
  mkdir -p data
  build/bin/frugal prepare-text /usr/share/games/fortunes -o data/fortunes.bin
fi
# A new run directory each time: an earlier run is never overwritten.
exec build/bin/frugal train configs/fortunes-gpt.yaml \
  --set run.name="fortunes-gpt-$(date +%Y%m%d-%H%M%S)" "$@"
