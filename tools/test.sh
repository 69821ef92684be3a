#!/usr/bin/env bash
# Set everything up (tools/bootstrap.sh) and run the whole test suite through CTest.
# Extra arguments go to ctest (e.g. -R checkpoint, -L unit; one CTest test per test file).
# Cases that need what this machine lacks (a CUDA device) are reported as skipped, not passed
# (tests/support/skip.h); their count and reasons follow CTest's closing lines.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# The whole suite (no ctest arguments) also fuzzes each reader briefly: tools/fuzz.sh with
# FRUGAL_FUZZ_RUNS inputs per target from a fixed seed (default 400, a few seconds each; 0
# skips it), in its own clang build (build-fuzz/). A fixed count and seed, not a time: how far
# it gets does not depend on the machine's speed.
fuzz_runs="${FRUGAL_FUZZ_RUNS:-400}"
fuzz=0
if [ $# -eq 0 ] && [ "$fuzz_runs" != 0 ]; then fuzz=1; fi
# Packages and the venv first, the fuzz build's among them (apt and pip, one at a time), and
# what the fuzz build takes from build/ (the library's code no fuzz target reaches, as an
# archive: tools/fuzz.sh), before the fuzz build starts beside the test build.
first_target=none
[ $fuzz = 1 ] && first_target=frugal_unfuzzed_archive
FRUGAL_FUZZ_DEPS=$fuzz FRUGAL_BUILD_TARGET=$first_target bash tools/bootstrap.sh
# The test-only Python packages (requirements-test.txt: transformers, peft, ...) download while
# the tests compile: only the tests' run needs them (on a fresh machine pip took 54 s here, most
# of it waiting on the network). Everything else bootstrap.sh sets up is there by now, so this
# second one only runs pip.
mkdir -p build
FRUGAL_TEST_DEPS=1 FRUGAL_BUILD_TARGET=none bash tools/bootstrap.sh >build/test-deps.log 2>&1 &
deps_pid=$!
fuzz_pid=""
# Whatever runs beside the build stops with this script.
bench_pid=""
trap '[ -n "$fuzz_pid" ] && kill -- -"$fuzz_pid" 2>/dev/null; [ -n "$bench_pid" ] && kill -- -"$bench_pid" 2>/dev/null; [ -n "$deps_pid" ] && kill "$deps_pid" 2>/dev/null' EXIT
# The fuzz build compiles beside the test build and the tests, at nice 19: it takes the CPU
# they leave idle (links, tests waiting on a timeout or on another rank) and, once they are
# done, all of it. In a process group of its own (set -m), stopped if this script stops, but in
# this script's session: a new session (setsid) is a new scheduler autogroup, which Linux gives
# an equal share of the CPU whatever its nice value.
if [ $fuzz = 1 ]; then
  mkdir -p build-fuzz
  set -m
  FRUGAL_FUZZ_ARCHIVE_BUILT=1 FRUGAL_FUZZ_BUILD_ONLY=1 nice -n 19 bash tools/fuzz.sh 1 \
    >build-fuzz/build.log 2>&1 &
  fuzz_pid=$!
  set +m
fi
# The tests and what they run; the benchmark programs, which no test runs, compile beside the
# tests below, off the way to their start.
bench=0
if [ $# -eq 0 ]; then bench=1; fi
if [ $bench = 1 ]; then FRUGAL_BUILD_TARGET=frugal_tests bash tools/bootstrap.sh; else bash tools/bootstrap.sh; fi
bench_pid=""
if [ $bench = 1 ]; then
  set -m
  nice -n 19 cmake --build build --target frugal_bench_cpu_adam frugal_bench_phase_timing \
    >build/bench-build.log 2>&1 &
  bench_pid=$!
  set +m
fi
if ! wait "$deps_pid"; then
  cat build/test-deps.log
  echo "tools/test.sh: installing the test-only Python packages failed (build/test-deps.log)" >&2
  exit 1
fi
deps_pid=""
cd build
rc=0
# One test file more than the cores: a multi-process test spends much of its time waiting (on a
# rank's timeout, a collective, a launcher's poll) and leaves a core idle that a third file
# takes (2 cores, warm: ctest -j2 527 s, -j3 474 s).
ctest --output-on-failure --timeout 900 -j "$(($(nproc) + 1))" "$@" || rc=$?
log=Testing/Temporary/LastTest.log
if [ -f "$log" ]; then
  grep '^SKIPPED: ' "$log" | sort | uniq -c | sed 's/^ *\([0-9]*\) SKIPPED: /skipped: \1 case(s): /' || true
fi
if [ -n "$bench_pid" ]; then
  bench_rc=0
  wait "$bench_pid" || bench_rc=$?
  bench_pid=""
  if [ $bench_rc != 0 ]; then
    tail -n 40 "$root/build/bench-build.log"
    echo "tools/test.sh: building the benchmark programs failed (build/bench-build.log)" >&2
    rc=1
  fi
fi
if [ $fuzz = 1 ]; then
  cd "$root"
  fuzz_rc=0
  wait "$fuzz_pid" || fuzz_rc=$?
  fuzz_pid=""
  if [ $fuzz_rc != 0 ]; then
    tail -n 60 build-fuzz/build.log
    echo "tools/test.sh: the fuzz build failed (exit $fuzz_rc; build-fuzz/build.log)" >&2
    rc=1
  else
    grep '^fuzz: build took' build-fuzz/build.log || true
    # (the build is up to date: this runs the targets)
    FRUGAL_FUZZ_ARCHIVE_BUILT=1 FRUGAL_FUZZ_RUNS="$fuzz_runs" bash tools/fuzz.sh 1 || rc=1
  fi
fi
exit $rc
