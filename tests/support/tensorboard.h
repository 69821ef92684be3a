// Reading event files back with TensorBoard itself (tests/python/read_tensorboard.py, the
// venv's `tensorboard` package, a test-only dependency).
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/helpers.h"

namespace frugal::test {

// {"scalars", "texts", "histograms", "raw"} of the event files in `dir` (see the script).
inline nlohmann::json read_tensorboard(const std::filesystem::path& dir) {
  const CommandResult r = run_command(
      python() + " " + quote((source_dir() / "tests/python/read_tensorboard.py").string()) + " " +
          quote(dir.string()),
      120);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace frugal::test
