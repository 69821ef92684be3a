#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; build-fuzz/, FRUGAL_FUZZ) and runs each for
# SECONDS (default 300) on a copy of its seed corpus (fuzz/corpus/<target>/), then prints the
# executions and findings per target. Exit code 1 when any target found something: the input
# that did it is in build-fuzz/findings/<target>/ (add it to fuzz/corpus/<target>/ once fixed).
#   bash tools/fuzz.sh            300 s per target (a human's run)
#   bash tools/fuzz.sh 10         10 s per target (the test suite's run: tools/test.sh)
#   bash tools/fuzz.sh 60 tokens  one target
#   FRUGAL_FUZZ_RUNS=400 bash tools/fuzz.sh   400 inputs per target from a fixed seed instead of
#                                 a time (the test suite's run: how far it gets does not depend
#                                 on the machine's speed)
# Each run starts from the committed corpus plus what earlier runs on this machine kept
# (build-fuzz/corpus/<target>/); only the committed corpus is in the repository.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds="${1:-300}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config safetensors checkpoint tokens idx hf_config tokenizer_json sentencepiece
  reshard chat)
clangxx="${FRUGAL_FUZZ_CXX:-clang++-14}"
# (libFuzzer reads -max_total_time=0 as "no limit")
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive number" >&2; exit 2; }

# Packages, the venv, and the library's code that no fuzz target reaches, which the fuzz build
# links as the normal build (build/) compiled it: its archive (src/CMakeLists.txt,
# frugal_unfuzzed). tools/test.sh builds that before it starts this beside its own build
# (FRUGAL_FUZZ_ARCHIVE_BUILT=1: two builds in build/ at once would race).
archive_target=frugal_unfuzzed_archive
[ "${FRUGAL_FUZZ_ARCHIVE_BUILT:-0}" = 1 ] && archive_target=none
FRUGAL_FUZZ_DEPS=1 FRUGAL_BUILD_TARGET=$archive_target bash tools/bootstrap.sh
archive="$root/build/lib/libfrugal_unfuzzed.a"
# -O0, not the release build's -O3: with ASan, UBSan and the coverage counters, optimizing was
# the bulk of this build's time (-O3: 120-330 s a unity batch here; -O1: 27-36 s, -O0: 13-14
# s), while the test suite's run is bounded by its input count, not by its speed. Measured
# from an empty ccache here (when this build still compiled the whole library): 432 CPU-s at
# -O1, 302 at -O0; the 10 targets' 400 inputs 15 s at -O1, 23 s at -O0 (a timed run by hand
# executes fewer inputs per second).
opt_flags="-O0 -DNDEBUG"
if [ ! -f build-fuzz/build.ninja ] ||
  ! grep -qx "CMAKE_CXX_FLAGS_RELEASE:STRING=$opt_flags" build-fuzz/CMakeCache.txt ||
  ! grep -qx "FRUGAL_USE_PCH:BOOL=ON" build-fuzz/CMakeCache.txt ||
  ! grep -qx "FRUGAL_FUZZ_UNFUZZED_ARCHIVE:FILEPATH=$archive" build-fuzz/CMakeCache.txt; then
  torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clangxx" \
    -DCMAKE_CXX_FLAGS_RELEASE="$opt_flags" \
    -DFRUGAL_FUZZ=ON -DFRUGAL_FUZZ_UNFUZZED_ARCHIVE="$archive" \
    -DFRUGAL_BUILD_TESTS=OFF -DFRUGAL_BUILD_BENCH=OFF -DFRUGAL_USE_PCH=ON \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DTORCH_CUDA_ARCH_LIST=9.0 >build-fuzz-configure.log 2>&1 ||
    { cat build-fuzz-configure.log; exit 1; }
  rm -f build-fuzz-configure.log
fi
start=$(date +%s)
cmake --build build-fuzz --parallel "$(nproc)" --target frugal_fuzz_targets
echo "fuzz: build took $(($(date +%s) - start)) s"
# FRUGAL_FUZZ_BUILD_ONLY=1: the build alone (tools/test.sh builds it beside the tests).
[ "${FRUGAL_FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

source tools/sanitizers/env.sh  # ASAN_OPTIONS, UBSAN_OPTIONS (and why)
# One target: its run, then its report line(s) in build-fuzz/report-<target>.txt.
fuzz_one() {
  local t=$1 corpus="build-fuzz/corpus/$1" findings="build-fuzz/findings/$1"
  local log="build-fuzz/fuzz-$1.log" report="build-fuzz/report-$1.txt" rc=0 runs
  # A counted run starts from the committed corpus alone, as on a fresh clone.
  [ -n "${FRUGAL_FUZZ_RUNS:-}" ] && { corpus="build-fuzz/corpus-counted/$t"; rm -rf "$corpus"; }
  mkdir -p "$corpus" "$findings"
  # -rss_limit_mb / -malloc_limit_mb: an input that makes a reader allocate past 2 GiB is a
  # finding (sizes read from files must be checked before they are allocated).
  # -timeout: one input running 10 s is a hang. No stdin: a config may say `extends: /dev/stdin`.
  local budget=(-max_total_time="$seconds")
  [ -n "${FRUGAL_FUZZ_RUNS:-}" ] && budget=(-runs="$FRUGAL_FUZZ_RUNS" -seed=1)
  build-fuzz/bin/frugal_fuzz_"$t" "$corpus" "fuzz/corpus/$t" \
    "${budget[@]}" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$findings/" -dict=fuzz/dictionaries/"$t".dict -print_final_stats=1 \
    </dev/null >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    { echo "fuzz: $t: FOUND a problem after ${runs:-?} executions (exit $rc); input in $findings/:"
      grep -E 'ERROR: |runtime error: |terminate called|Test unit written' "$log" | head -5 |
        sed 's/^/  /' || true; } >"$report"
  else
    echo "fuzz: $t: ${runs:-?} executions, no findings (corpus $(ls "$corpus" | wc -l) inputs)" \
      >"$report"
  fi
}

# The targets run side by side, one per core (each is one process on one core); their reports
# follow in the targets' order.
for t in "${targets[@]}"; do
  rm -f "build-fuzz/report-$t.txt"
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
found=0
for t in "${targets[@]}"; do
  report="build-fuzz/report-$t.txt"
  if [ ! -f "$report" ]; then
    echo "fuzz: $t: did not report (build-fuzz/fuzz-$t.log)"
    found=1
    continue
  fi
  cat "$report"
  grep -q '^fuzz: [a-z_]*: FOUND' "$report" && found=1
done
exit $found
