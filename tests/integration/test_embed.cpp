// find_package(frugal) from an installed tree: install, build examples/embed against it,
// run it, and check that its own module learned.
#include <catch2/catch.hpp>

#include "support/helpers.h"

using namespace frugal;

TEST_CASE("examples/embed builds against the installed package and trains", "[integration][embed][slow]") {
  test::TempDir dir("frugal-embed");
  const std::string prefix = (dir / "prefix").string();
  auto install = test::run_command("cmake --install " + test::quote(FRUGAL_BINARY_DIR) +
                                   " --prefix " + test::quote(prefix));
  INFO(install.out << install.err);
  REQUIRE(install.exit_code == 0);
  auto torch_prefix = test::run_command(
      test::python() + " -c 'import torch; print(torch.utils.cmake_prefix_path, end=\"\")'");
  REQUIRE(torch_prefix.exit_code == 0);
  const std::string build = (dir / "build").string();
  auto configure = test::run_command(
      "cmake -S " + test::quote((test::source_dir() / "examples/embed").string()) + " -B " +
      test::quote(build) + " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" +
      test::quote(prefix + ";" + torch_prefix.out));
  INFO(configure.out << configure.err);
  REQUIRE(configure.exit_code == 0);
  auto compile = test::run_command("cmake --build " + test::quote(build));
  INFO(compile.out << compile.err);
  REQUIRE(compile.exit_code == 0);
  // With a config: its strategy and optim sections drive the engine.
  test::write_text(dir / "embed.yaml", "optim: {type: adam, lr: 0.02}\nstrategy: {accumulation: 4}\n");
  for (const std::string args : {std::string(), test::quote((dir / "embed.yaml").string())}) {
    auto run = test::run_command(build + "/embed_example " + args);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK(run.out.find("last loss") != std::string::npos);
  }
}
