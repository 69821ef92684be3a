// A checkpoint's contents for byte-for-byte comparisons between runs.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/helpers.h"

namespace frugal::test {

// Every file under a checkpoint directory by relative path, with its bytes; meta.json by what
// it says of the training state (its config names the run, so its bytes differ between runs),
// and the manifest left out (it hashes meta.json).
inline std::map<std::string, std::string> checkpoint_contents(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string file = std::filesystem::relative(e.path(), dir).string();
    if (file == "manifest.json") continue;
    std::string bytes = read_text(e.path());
    if (file == "meta.json") {
      nlohmann::json meta = nlohmann::json::parse(bytes);
      meta.erase("config");
      bytes = meta.dump();
    }
    out[file] = std::move(bytes);
  }
  return out;
}

// Two checkpoints equal file for file, byte for byte (by checkpoint_contents).
inline void check_identical(const std::filesystem::path& expected, const std::filesystem::path& got) {
  INFO("expected " << expected << ", got " << got);
  REQUIRE(std::filesystem::exists(got));
  const auto want = checkpoint_contents(expected);
  const auto have = checkpoint_contents(got);
  REQUIRE(want.size() >= 2);
  REQUIRE(have.size() == want.size());
  for (const auto& [file, bytes] : want) {
    INFO(file);
    REQUIRE(have.count(file) == 1);
    CHECK(have.at(file) == bytes);
  }
}

}  // namespace frugal::test
