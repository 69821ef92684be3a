// find_package(frugal) from an installed tree: install, build examples/embed against it,
// run it, and check that its own module learned, in one process and as a 2-rank zero3 job
// with checkpointing and accumulation (its own loop: Engine::forward_backward, then
// optimizer_step), which must end where the one-process run with the same strategy ends.
#include <catch2/catch.hpp>
#include <iostream>
#include <regex>

#include "multiproc/multiproc.h"
#include "support/helpers.h"

using namespace frugal;

TEST_CASE("examples/embed builds against the installed package and trains", "[integration][embed][slow]") {
  test::TempDir dir("frugal-embed");
  const std::string prefix = (dir / "prefix").string();
  auto install = test::run_command("cmake --install " + test::quote(test::binary_dir().string()) +
                                   " --prefix " + test::quote(prefix));
  INFO(install.out << install.err);
  REQUIRE(install.exit_code == 0);
  auto torch_prefix = test::run_command(
      test::python() + " -c 'import torch; print(torch.utils.cmake_prefix_path, end=\"\")'");
  REQUIRE(torch_prefix.exit_code == 0);
  const std::string build = (dir / "build").string();
  // No build type, so no optimizer: the example's own code is a loop around the library's, and
  // -O3 added 10 s to the 40 s its compile takes here (its time goes to torch's headers).
  auto configure = test::run_command(
      "cmake -S " + test::quote((test::source_dir() / "examples/embed").string()) + " -B " +
      test::quote(build) + " -G Ninja -DCMAKE_BUILD_TYPE= -DCMAKE_PREFIX_PATH=" +
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

  // The same loop under zero3 at world 2, with full checkpointing and accumulation 2, against
  // one process with the same checkpointing and accumulation: the configs the example ships,
  // run as the README shows (the program by its path; by a bare name only on PATH).
  const std::string one_yaml = (test::source_dir() / "examples/embed/one.yaml").string();
  const std::string zero3_yaml = (test::source_dir() / "examples/embed/zero3.yaml").string();
  auto last_loss = [](const std::string& out) {
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex(R"(last loss (\S+))")));
    return std::stod(m[1].str());
  };
  auto one = test::run_command(build + "/embed_example " + test::quote(one_yaml));
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  auto job = test::launch(2, test::quote(build + "/embed_example") + " " + test::quote(zero3_yaml));
  INFO(job.out << job.err);
  REQUIRE(job.exit_code == 0);
  CHECK_THAT(job.out + job.err, Catch::Contains("zero3"));
  // 200 steps of AdamW; fp32 sums in another order across ranks.
  std::cout << "embed example: last loss " << last_loss(one.out) << " in one process, "
            << last_loss(job.out) << " as a 2-rank zero3 job\n";
  CHECK(last_loss(job.out) == Approx(last_loss(one.out)).epsilon(1e-3));
  // By its bare name: found on PATH, or the launcher says to write ./embed_example.
  auto on_path = test::run_command("cd " + test::quote(build) + " && PATH=" + test::quote(build) +
                                   ":\"$PATH\" " + test::quote(test::frugal_binary()) +
                                   " launch --nproc-per-node 1 --master-port 0 -- embed_example " +
                                   test::quote(one_yaml));
  INFO(on_path.out << on_path.err);
  CHECK(on_path.exit_code == 0);
  auto here = test::run_command("cd " + test::quote(build) + " && " +
                                test::quote(test::frugal_binary()) +
                                " launch --nproc-per-node 1 -- embed_example");
  CHECK(here.exit_code == 2);
  CHECK(here.err == "frugal: error: launch: 'embed_example' is not on PATH; to run the one in "
                    "this folder, write './embed_example'\n");
}
