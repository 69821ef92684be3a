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

#include "support/helpers.h"

namespace frugal::io::test {

// A scratch directory (frugal::test::TempDir) that can also list what it holds.
class ScratchDir : public frugal::test::TempDir {
 public:
  ScratchDir() : frugal::test::TempDir("frugal-io-test") {}
  // Names of the entries directly inside, sorted (to check no temp file was left behind).
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path())) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
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
