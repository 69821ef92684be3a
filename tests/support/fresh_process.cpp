#include "support/fresh_process.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "support/helpers.h"

namespace frugal::test {

namespace {
// The environment variable that tells the new process which case it was started for.
constexpr const char* kFreshCase = "FRUGAL_TEST_FRESH_CASE";

// A Catch2 test spec that matches exactly `name`: its special characters escaped.
std::string exact_spec(const std::string& name) {
  std::string spec;
  for (char c : name) {
    if (std::strchr("[],*\\\"~", c) != nullptr) spec += '\\';
    spec += c;
  }
  return spec;
}
}  // namespace

bool in_fresh_process() {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  const char* started_for = std::getenv(kFreshCase);
  if (started_for != nullptr && name == started_for) return true;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const CommandResult r = run_command(std::string(kFreshCase) + "=" + quote(name) + " " +
                                          quote(self) + " --warn NoTests " + quote(exact_spec(name)),
                                      120);
  INFO("the case in a new process:\n" << r.out << r.err);
  CHECK(r.exit_code == 0);
  return false;
}

}  // namespace frugal::test
