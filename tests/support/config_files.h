// Helpers shared by the config tests: a scratch folder for YAML files, and the message of the
// frugal::Error an expression throws.
#pragma once

#include "frugal/config/load.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frugal/util/error.h"
#include "support/helpers.h"

namespace frugal_test {

// A scratch folder (frugal::test::TempDir) to write config files into.
class ConfigDir : public frugal::test::TempDir {
 public:
  ConfigDir() : frugal::test::TempDir("frugal-config") {}
  // Writes `text` to <dir>/<name> (folders created) and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path() / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  std::string operator/(const std::string& name) const { return (path() / name).string(); }
};

// what() of the frugal::Error that `f` throws; otherwise a text saying what happened instead,
// so the failing CHECK shows it next to the expected message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const frugal::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a frugal::Error: ") + e.what() + ">";
  }
  return "<no error>";
}

// The error for YAML text loaded under the name "c.yaml".
inline std::string error_for(const std::string& yaml,
                             const std::vector<std::string>& overrides = {}) {
  return error_of([&] { frugal::load_config_string(yaml, "c.yaml", overrides); });
}

}  // namespace frugal_test
