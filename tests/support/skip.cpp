#include "support/skip.h"

#include <ATen/Context.h>
// The listener base class is behind this switch in Catch2 v2.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>
#include <iostream>

namespace frugal::test {
namespace {

int cases_run = 0;
int cases_skipped = 0;
bool current_skipped = false;

// Counts the test cases a run starts, so that main() can tell "all skipped" from "some ran".
struct SkipCounter : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    ++cases_run;
    current_skipped = false;
  }
};
CATCH_REGISTER_LISTENER(SkipCounter)

}  // namespace

bool skip(const std::string& why) {
  if (!current_skipped) ++cases_skipped;
  current_skipped = true;
  std::cout << "SKIPPED: " << why << std::endl;
  SUCCEED("skipped: " << why);
  return true;
}

bool skip_without_cuda() {
  if (at::hasCUDA()) return false;
  return skip("no CUDA device (tools/gpu/check.sh runs this on a GPU; docs/gpu.md)");
}

int exit_code_with_skips(int catch_result) {
  if (catch_result == 0 && cases_run > 0 && cases_skipped == cases_run) return kSkipExitCode;
  return catch_result;
}

}  // namespace frugal::test
