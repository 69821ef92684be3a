# Sanitizer run-time options for frugal's instrumented builds (sourced by tools/sanitize.sh and
# tools/fuzz.sh). LibTorch and the Debian libraries are not instrumented; each setting says why.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# detect_leaks=0: these runs look for memory errors and undefined behaviour, not leaks. torch
# keeps process-lifetime allocations (operator registries, thread pools) that it does not free
# at exit, which LeakSanitizer would report without telling torch's from frugal's.
# abort_on_error=1: a report fails the test that triggered it (CTest sees the abort).
# protect_shadow_gap=0: NVIDIA's advice for the CUDA runtime under ASan (it maps memory where
# ASan's shadow gap is), so that the same build also runs on a GPU machine.
# allocator_may_return_null=1: an impossible allocation (a config asking for a 256 TB model)
# fails as it does without ASan (malloc returns null, torch raises its out-of-memory error, and
# frugal reports it in one line); ASan's default aborts the process instead.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:protect_shadow_gap=0:allocator_may_return_null=1}"
# print_stacktrace=1: where the undefined behaviour happened, not only the line.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$here/tsan.supp}"
