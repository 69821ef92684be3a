// A run's (or checkpoint's) weights, read back through `frugal export` as the user would, and
// the largest difference between two sets of them.
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "frugal/io/safetensors.h"
#include "support/cli.h"

namespace frugal::test {

// `frugal export SOURCE --format safetensors -o FILE`, then FILE's tensors by name.
inline std::map<std::string, at::Tensor> exported_weights(const std::filesystem::path& source,
                                                          const std::filesystem::path& file) {
  CommandResult r = frugal("export " + quote(source.string()) + " --format safetensors -o " +
                           quote(file.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, at::Tensor> out;
  for (auto& [k, v] : io::read_safetensors(file)) out[k] = v;
  return out;
}

// Largest absolute difference over tensors of the same names (the sets must match).
inline double max_abs_diff(const std::map<std::string, at::Tensor>& a,
                           const std::map<std::string, at::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (const auto& [k, v] : a) worst = std::max(worst, (v - b.at(k)).abs().max().item<double>());
  return worst;
}

}  // namespace frugal::test
