#!/usr/bin/env bash
# The test suite under sanitizers, each kind in its own build folder (cmake/FrugalSanitize.cmake):
#   bash tools/sanitize.sh asan   ASan + UBSan (build-asan/): the unit tests and the bad-input
#                                 tests, the corpus among them (every case runs the instrumented
#                                 CLI)
#   bash tools/sanitize.sh tsan   TSan (build-tsan/): the data loader's worker threads, the
#                                 offload pipeline's host thread, the launcher's supervision
#   bash tools/sanitize.sh        both
#   bash tools/sanitize.sh asan '[integration]'   other test cases (a Catch2 test spec)
# Each case runs in its own process. Run-time options and suppressions:
# tools/sanitizers/ (each says why).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
kinds=(asan tsan)
[ $# -gt 0 ] && { kinds=("$1"); shift; }
FRUGAL_TEST_DEPS=1 FRUGAL_BUILD_TARGET=none bash tools/bootstrap.sh  # packages, venv
torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
source tools/sanitizers/env.sh

rc=0
for kind in "${kinds[@]}"; do
  case "$kind" in
    # Only the test files the cases live in are built (FRUGAL_TEST_FILES, tests/CMakeLists.txt);
    # another spec may need more: -DFRUGAL_TEST_FILES= on the build folder builds them all.
    # ~[tensorboard]: the events library is loaded with RTLD_DEEPBIND (src/train/tensorboard/
    # events.h says why), which ASan's runtime refuses to load at all (google/sanitizers#611).
    asan) sanitizers=address,undefined; spec="[unit]~[tensorboard],[bad_input]~[tensorboard]"
          files="/unit/|/bad_inputs/"; run_env="" ;;
    # One OpenMP thread (the test binary's FRUGAL_TEST_THREADS, the CLI's OMP_NUM_THREADS):
    # torch's intra-op parallel_for then runs on the calling thread. TSan cannot see libgomp's
    # synchronisation (it is not instrumented), so every parallel_for reads as a race between
    # the caller and OpenMP's workers; frugal's own threads (the loader's workers, the offload
    # host thread, the launcher's) are what this run is for.
    tsan) sanitizers=thread; spec="loader:*,[offload],[launch]"
          files="test_data_loader|test_offload|test_launch"
          run_env="FRUGAL_TEST_THREADS=1 OMP_NUM_THREADS=1" ;;
    *) echo "sanitize.sh: asan or tsan, not '$kind'" >&2; exit 2 ;;
  esac
  [ $# -gt 0 ] && spec="$1"
  dir="build-$kind"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFRUGAL_SANITIZE="$sanitizers" \
      -DFRUGAL_BUILD_BENCH=OFF -DFRUGAL_TEST_FILES="$files" -DCMAKE_PREFIX_PATH="$torch_prefix" \
      -DPython3_EXECUTABLE="$root/.venv/bin/python" -DTORCH_CUDA_ARCH_LIST=9.0 \
      >"$dir-configure.log" 2>&1 || { cat "$dir-configure.log"; exit 1; }
    rm -f "$dir-configure.log"
  fi
  start=$(date +%s)
  cmake --build "$dir" --parallel "$(nproc)" --target frugal_tests
  built=$(date +%s)
  echo "sanitize: $kind: build took $((built - start)) s; running '$spec'"
  # Each case in its own process: a case that changes process-wide state
  # (a registry, malloc's settings) cannot fail another, and a sanitizer's report, which ends
  # its process, stops only its own case. Names are escaped for Catch's test spec.
  : >"$dir/sanitize.log"
  failed=()
  count=0
  while IFS= read -r name; do
    [ -n "$name" ] || continue
    count=$((count + 1))
    escaped=$(printf '%s' "$name" | sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/\[/\\[/g')
    case_rc=0
    (cd "$dir" && env $run_env timeout 900 ./bin/frugal_tests "$escaped" </dev/null) \
      >>"$dir/sanitize.log" 2>&1 ||
      case_rc=$?
    # 77: a case that needs a CUDA device, skipped.
    if [ "$case_rc" -ne 0 ] && [ "$case_rc" -ne 77 ]; then
      failed+=("$name (exit $case_rc)")
      echo "sanitize: $kind: FAILED: $name (exit $case_rc)" >>"$dir/sanitize.log"
    fi
  done < <(cd "$dir" && ./bin/frugal_tests --list-test-names-only "$spec")
  if [ ${#failed[@]} -gt 0 ]; then
    rc=1
    echo "sanitize: $kind: ${#failed[@]} of $count cases FAILED, see $dir/sanitize.log:"
    printf '  %s\n' "${failed[@]}"
    grep -E 'ERROR: |WARNING: ThreadSanitizer|runtime error: ' "$dir/sanitize.log" | head -5 || true
  else
    echo "sanitize: $kind: clean, $count cases ($(($(date +%s) - built)) s)"
  fi
done
exit $rc
