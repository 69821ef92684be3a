// Tests that need what this machine lacks (a CUDA device) are reported as skipped, not passed.
// Such a test calls skip(why) and returns; the reason goes to stdout as a line "SKIPPED: why",
// which tools/test.sh counts under the suite's closing lines. When every test case that one run
// of the binary ran was skipped (CTest runs one test file's cases per process), the binary
// exits with kSkipExitCode, which tests/CMakeLists.txt gives CTest as SKIP_RETURN_CODE.
#pragma once

#include <string>

namespace frugal::test {

inline constexpr int kSkipExitCode = 77;

// Marks the running test case as skipped; always true, for `if (skip(...)) return;`.
bool skip(const std::string& why);
// skip("no CUDA device ...") on a machine without CUDA; false where there is one.
bool skip_without_cuda();
// The binary's exit code: kSkipExitCode when the run passed and skipped every case it ran.
int exit_code_with_skips(int catch_result);

}  // namespace frugal::test
