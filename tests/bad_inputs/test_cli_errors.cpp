// Bad input through the CLI: one line on stderr naming the problem, exit code 2, and nothing
// that existed is changed or lost.
#include <catch2/catch.hpp>

#include <filesystem>

#include "frugal/io/checkpoint.h"
#include "support/cli.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

// stderr is exactly one line, the error, and it contains every fragment.
void check_user_error(const test::CommandResult& r, std::initializer_list<std::string> fragments) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(test::count_lines(r.err) == 1);
  CHECK(r.err.rfind("frugal: error: ", 0) == 0);
  for (const auto& f : fragments) CHECK(r.err.find(f) != std::string::npos);
}

}  // namespace

TEST_CASE("malformed YAML names file:line:column", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "bad.yaml", "run:\n  name: x\nmodel: {type: gpt\n");
  check_user_error(test::frugal("train " + test::quote((dir / "bad.yaml").string())),
                   {(dir / "bad.yaml").string() + ":"});
}

TEST_CASE("unknown key gets a did-you-mean", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "bad.yaml", "optim:\n  lrr: 0.1\n");
  check_user_error(test::frugal("config validate " + test::quote((dir / "bad.yaml").string())),
                   {"bad.yaml:2:3", "lrr", "did you mean 'lr'"});
}

TEST_CASE("wrong type names the key and what was expected", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "bad.yaml", "optim:\n  lr: fast\n");
  check_user_error(test::frugal("train " + test::quote((dir / "bad.yaml").string())),
                   {"bad.yaml:2:", "optim.lr", "fast"});
}

TEST_CASE("missing config and missing data file", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  check_user_error(test::frugal("train " + test::quote((dir / "nope.yaml").string())),
                   {"nope.yaml", "No such file"});
  test::write_text(dir / "cfg.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "m", 2) +
                                         "# data file that is not there\n");
  check_user_error(test::frugal("train " + test::quote((dir / "cfg.yaml").string()) +
                                " --set data.type=tokens --set data.path=" +
                                test::quote((dir / "missing.bin").string())),
                   {"missing.bin"});
}

TEST_CASE("an existing run directory is never overwritten unless asked", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "cfg.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "r", 3));
  const std::string cfg = test::quote((dir / "cfg.yaml").string());
  REQUIRE(test::frugal("train " + cfg).exit_code == 0);
  const fs::path metrics = dir / "runs/r/metrics.jsonl";
  const std::string before = test::read_text(metrics);
  check_user_error(test::frugal("train " + cfg), {"already exists", "run.resume=auto", "run.overwrite=true"});
  CHECK(test::read_text(metrics) == before);
  // Asked: overwrite replaces it, resume continues it.
  CHECK(test::frugal("train " + cfg + " --set run.resume=auto --set train.max_steps=4").exit_code == 0);
  CHECK(test::frugal("train " + cfg + " --set run.overwrite=true").exit_code == 0);
}

TEST_CASE("a truncated or corrupt checkpoint is refused and kept", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "cfg.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "c", 5));
  const std::string cfg = test::quote((dir / "cfg.yaml").string());
  REQUIRE(test::frugal("train " + cfg).exit_code == 0);
  const fs::path ckpt = dir / "runs/c/checkpoints/step_00000005";
  REQUIRE(fs::exists(ckpt / "manifest.json"));

  // Flip one byte of the weights.
  std::string model = test::read_text(ckpt / "model.pt");
  const std::string original = model;
  model[model.size() / 2] ^= 0x5a;
  test::write_text(ckpt / "model.pt", model);
  check_user_error(test::frugal("train " + cfg + " --set run.resume=auto --set train.max_steps=8"),
                   {"model.pt", "corrupt"});
  CHECK(fs::exists(ckpt / "model.pt"));

  // Truncate the optimizer state.
  test::write_text(ckpt / "model.pt", original);
  std::string opt = test::read_text(ckpt / "optimizer.pt");
  test::write_text(ckpt / "optimizer.pt", opt.substr(0, opt.size() / 3));
  check_user_error(test::frugal("train " + cfg + " --set run.resume=auto --set train.max_steps=8"),
                   {"optimizer.pt", "truncated"});
  CHECK(fs::file_size(ckpt / "optimizer.pt") == opt.size() / 3);

  // Export refuses the broken checkpoint too.
  check_user_error(test::frugal("export " + test::quote(ckpt.string()) + " -o " +
                                test::quote((dir / "m.safetensors").string())),
                   {"optimizer.pt"});
  CHECK(!fs::exists(dir / "m.safetensors"));
}

TEST_CASE("export and prepare-text never replace an existing file unasked", "[bad_input][cli]") {
  test::TempDir dir("frugal-bad");
  test::write_text(dir / "cfg.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "x", 2));
  REQUIRE(test::frugal("train " + test::quote((dir / "cfg.yaml").string())).exit_code == 0);
  test::write_text(dir / "out.pt", "precious");
  check_user_error(test::frugal("export " + test::quote((dir / "runs/x").string()) +
                                " --format pt -o " + test::quote((dir / "out.pt").string())),
                   {"out.pt", "already exists", "--overwrite"});
  CHECK(test::read_text(dir / "out.pt") == "precious");
  test::write_text(dir / "in.txt", "hello world\n");
  check_user_error(test::frugal("prepare-text " + test::quote((dir / "in.txt").string()) +
                                " -o " + test::quote((dir / "out.pt").string())),
                   {"out.pt"});
  CHECK(test::read_text(dir / "out.pt") == "precious");
}

TEST_CASE("an unknown --set key is a user error", "[bad_input][cli]") {
  check_user_error(
      test::frugal("config show " +
                   test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()) +
                   " --set optim.momentun=0.9"),
      {"--set optim.momentun", "did you mean 'momentum'"});
}
