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

namespace frugal_test {

// A fresh folder under the system temp dir, removed with everything in it.
class ConfigDir {
 public:
  ConfigDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("frugal-config-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    remove_tree(path_);
    std::filesystem::create_directories(path_);
  }
  ~ConfigDir() { remove_tree(path_); }
  ConfigDir(const ConfigDir&) = delete;
  ConfigDir& operator=(const ConfigDir&) = delete;

  // Writes `text` to <dir>/<name> (folders created) and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  // Not std::filesystem::remove_all: libtorch.so exports its own copy of std::filesystem, which
  // wins symbol resolution in binaries linked with torch, and its remove_all crashes (SIGSEGV)
  // on a non-empty folder. remove() and directory_iterator are fine.
  static void remove_tree(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::symlink_status(path, ec))) {
      std::vector<std::filesystem::path> children;
      for (const auto& entry : std::filesystem::directory_iterator(path, ec))
        children.push_back(entry.path());
      for (const auto& child : children) remove_tree(child);
    }
    std::filesystem::remove(path, ec);
  }

  std::filesystem::path path_;
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
