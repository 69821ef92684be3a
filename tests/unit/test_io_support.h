// Helpers shared by the io tests: a scratch directory and bit-for-bit tensor comparison.
#pragma once

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "frugal/io/remove_tree.h"

namespace frugal::io::test {

// A fresh directory under the system temp folder, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("frugal-io-test-{}-{}", static_cast<long>(::getpid()), counter++);
    frugal::io::remove_tree(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Not std::filesystem::remove_all: see frugal/io/remove_tree.h.
  ~TempDir() {
    try {
      frugal::io::remove_tree(path_);
    } catch (...) {
    }
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  // Names of the entries directly inside, sorted (to check no temp file was left behind).
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// The values' bytes in row-major order, computed apart from the io code under test.
inline std::string bytes_of(const at::Tensor& t) {
  at::Tensor c = t.detach().cpu().resolve_conj().resolve_neg().contiguous();
  std::string out(c.nbytes(), '\0');
  if (c.nbytes() > 0) std::memcpy(out.data(), c.const_data_ptr(), c.nbytes());
  return out;
}

// Same dtype, same shape, same bytes (so NaN payloads and -0.0 count).
inline bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && bytes_of(a) == bytes_of(b);
}

}  // namespace frugal::io::test
