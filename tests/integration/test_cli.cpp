// The CLI end to end: train writes its run directory; config show/validate; prepare-text
// feeds a token-shard run; export writes files Python reads back to the same tensors.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/io/checkpoint.h"
#include "frugal/util/version.h"
#include "support/cli.h"

using namespace frugal;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("frugal train writes config, metrics, log and checkpoints", "[integration][cli]") {
  test::TempDir dir("frugal-cli");
  test::write_text(dir / "tiny.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "t", 6));
  auto r = test::frugal("train " + test::quote((dir / "tiny.yaml").string()) +
                        " --set train.max_steps=7 --set optim.lr=0.01");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir / "runs/t";
  CHECK(r.out.find("run directory: " + run.string()) != std::string::npos);
  CHECK(fs::exists(run / "train.log"));
  CHECK(test::read_text(run / "config.resolved.yaml").find("max_steps: 7") != std::string::npos);
  std::istringstream metrics(test::read_text(run / "metrics.jsonl"));
  std::string line;
  int steps = 0;
  while (std::getline(metrics, line)) {
    json j = json::parse(line);
    if (!j.contains("loss")) continue;
    ++steps;
    CHECK(j["step"].get<int>() == steps);
    CHECK(j["lr"].get<double>() == Approx(0.01));
    for (const char* key : {"grad_norm", "tokens_per_s", "step_time_s", "loss_scale", "skipped",
                            "host_rss_bytes", "host_rss_peak_bytes"}) {
      CHECK(j.contains(key));
    }
  }
  CHECK(steps == 7);
  auto ckpts = list_checkpoints(run / "checkpoints");
  REQUIRE(ckpts.size() == 2);
  CHECK(ckpts.back().filename() == "step_00000007");
}

TEST_CASE("a start that fails leaves no run directory behind: the corrected command reruns",
          "[integration][cli][bad_input]") {
  test::TempDir dir("frugal-cli-failed-start");
  test::write_text(dir / "tiny.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "t", 2));
  const std::string train = "train " + test::quote((dir / "tiny.yaml").string());
  // Data that is not there: found while the run is built, after its directory was made.
  auto bad = test::frugal(train + " --set data.type=tokens --set data.path=" +
                          test::quote((dir / "missing.bin").string()));
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("missing.bin"));
  CHECK_FALSE(fs::exists(dir / "runs/t"));
  auto good = test::frugal(train);
  INFO(good.out << good.err);
  CHECK(good.exit_code == 0);
  // A directory this start did not make (an earlier run's) stays, with all it held.
  auto again = test::frugal(train + " --set run.resume=auto --set train.max_steps=3 "
                            "--set data.type=tokens --set data.path=" +
                            test::quote((dir / "missing.bin").string()));
  CHECK(again.exit_code == 2);
  CHECK(fs::exists(dir / "runs/t/checkpoints/step_00000002/manifest.json"));
}

TEST_CASE("strategies from YAML: fp16-mixed with checkpointing reports scale and memory",
          "[integration][cli]") {
  test::TempDir dir("frugal-cli-strat");
  test::write_text(dir / "tiny.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "s", 4) +
                                          "strategy:\n  precision: fp16-mixed\n"
                                          "  checkpointing: full\n  accumulation: 2\n");
  auto r = test::frugal("train " + test::quote((dir / "tiny.yaml").string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("checkpointing: policy full wraps 2 units") != std::string::npos);
  CHECK(r.out.find("memory summary (cpu)") != std::string::npos);
  std::istringstream metrics(test::read_text(dir / "runs/s/metrics.jsonl"));
  std::string line;
  int records = 0;
  while (std::getline(metrics, line)) {
    json j = json::parse(line);
    if (!j.contains("loss")) continue;
    ++records;
    CHECK(j["loss_scale"].get<double>() == 65536.0);
    CHECK(j["mem_allocated_peak_bytes"].get<int64_t>() > 0);
    CHECK(j["mem_allocated_peak_bytes"].get<int64_t>() >= j["mem_allocated_bytes"].get<int64_t>());
  }
  CHECK(records == 4);
}

TEST_CASE("the version is the one CMake's project() names: library and CLI", "[integration][cli]") {
  CHECK(std::string(frugal::version()) == FRUGAL_PROJECT_VERSION);
  auto shown = test::frugal("--version");
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.out == std::string("frugal ") + FRUGAL_PROJECT_VERSION + "\n");
}

TEST_CASE("frugal config show applies --set, validate says OK", "[integration][cli]") {
  const std::string cfg = test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string());
  auto show = test::frugal("config show " + cfg + " --set optim.lr=0.125");
  INFO(show.err);
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.find("lr: 0.125") != std::string::npos);
  auto ok = test::frugal("config validate " + cfg);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("OK") != std::string::npos);
  auto builtin = test::frugal("config show");
  CHECK(builtin.exit_code == 0);
  CHECK(builtin.out.find("fortunes") != std::string::npos);
}

TEST_CASE("prepare-text makes byte tokens a tokens run can train on", "[integration][cli]") {
  test::TempDir dir("frugal-text");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  test::write_text(dir / "corpus/a.txt", text);
  test::write_text(dir / "corpus/b.txt", text);
  auto prep = test::frugal("prepare-text " + test::quote((dir / "corpus").string()) + " -o " +
                           test::quote((dir / "corpus.bin").string()));
  INFO(prep.out << prep.err);
  REQUIRE(prep.exit_code == 0);
  CHECK(fs::file_size(dir / "corpus.bin") == 2 * text.size() * 2);  // uint16 per byte
  std::string yaml = test::tiny_gpt_yaml((dir / "runs").string(), "tok", 4);
  yaml += "generate: {tokens: 16}\n";
  test::write_text(dir / "tok.yaml", yaml);
  auto train = test::frugal("train " + test::quote((dir / "tok.yaml").string()) +
                            " --set data.type=tokens --set data.path=" +
                            test::quote((dir / "corpus.bin").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  CHECK(train.out.find("--- sample ---") != std::string::npos);
}

TEST_CASE("export writes .pt and safetensors that Python reads back", "[integration][cli][python]") {
  test::TempDir dir("frugal-export");
  test::write_text(dir / "tiny.yaml", test::tiny_gpt_yaml((dir / "runs").string(), "e", 3));
  REQUIRE(test::frugal("train " + test::quote((dir / "tiny.yaml").string())).exit_code == 0);
  const fs::path run = dir / "runs/e";
  for (const char* fmt : {"pt", "safetensors"}) {
    auto r = test::frugal("export " + test::quote(run.string()) + " --format " + fmt + " -o " +
                          test::quote((dir / (std::string("model.") + fmt)).string()));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  auto py = test::run_command(
      test::python() + " " +
      test::quote((test::source_dir() / "tests/python/summarize_export.py").string()) + " " +
      test::quote((dir / "model.pt").string()) + " " +
      test::quote((dir / "model.safetensors").string()));
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  json summary = json::parse(py.out);
  Checkpoint ckpt = load_checkpoint(*latest_checkpoint(run / "checkpoints"));
  REQUIRE(summary.size() == ckpt.model.size());
  for (const auto& [name, t] : ckpt.model) {
    INFO(name);
    REQUIRE(summary.contains(name));
    std::vector<int64_t> shape = summary[name]["shape"];
    CHECK(at::IntArrayRef(shape) == t.sizes());
    CHECK(summary[name]["dtype"] == "torch.float32");
    // Sum and sum of squares in float64 on both sides: any changed byte shows.
    CHECK(summary[name]["sum"].get<double>() == Approx(t.to(at::kDouble).sum().item<double>()).epsilon(1e-12));
    CHECK(summary[name]["sumsq"].get<double>() == Approx(t.to(at::kDouble).pow(2).sum().item<double>()).epsilon(1e-12));
  }
}
