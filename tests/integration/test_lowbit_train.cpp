// `frugal train` with the low-bit optimizers from YAML: the loss falls, a run resumed from
// its checkpoint ends with a final checkpoint byte for byte equal to the uninterrupted run's
// (the 8-bit codes, block maxima and factored moments came back exactly), adamw8bit with
// strategy.offload.optimizer steps bit for bit as without, and under zero2 at 2 ranks
// (quantized per rank's flat shard) a resume is exact too.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <sstream>

#include "support/checkpoint_files.h"
#include "support/cli.h"
#include "support/model_configs.h"
#include "support/weights.h"

namespace fs = std::filesystem;
using namespace frugal;

namespace {


// The training losses of metrics.jsonl, in step order.
std::vector<double> lowbit_losses(const fs::path& run) {
  std::vector<double> out;
  std::istringstream lines(test::read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

std::string lowbit_yaml(const fs::path& dir, const std::string& optim) {
  return "run: {dir: '" + dir.string() + "', seed: 4}\n"
         "model: " + test::transformer_yaml("gpt", 2, 2, 32, 16, 64, "dropout: 0.1") + "\n"
         "data: {type: synthetic, micro_batch_size: 8, synthetic_samples: 256, num_workers: 0}\n"
         "optim: " + optim + "\n"
         "train: {max_steps: 12, log_every: 1, eval_batches: 0, progress: none, "
         "checkpoint_every: 6, keep_last: 2}\n"
         "generate: {tokens: 0}\n";
}

void lowbit_run(const std::string& prefix, const fs::path& cfg, const std::string& args) {
  test::CommandResult r = test::frugal(prefix + "train " + test::quote(cfg.string()) + " " + args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

// A run straight to step 12 and one resumed from the first's step-6 checkpoint end alike.
// Whether a saved optimizer state holds a first moment: a "<param>/exp_avg" key, not only the
// "<param>/exp_avg_sq..." ones.
bool has_first_moment(const std::string& optimizer_pt) {
  const std::string key = "/exp_avg";
  for (size_t at = optimizer_pt.find(key); at != std::string::npos;
       at = optimizer_pt.find(key, at + 1)) {
    if (at + key.size() < optimizer_pt.size() && optimizer_pt[at + key.size()] != '_') return true;
  }
  return false;
}

// The loss must fall by `min_drop` over the 12 steps.
void check_resume_exact(const test::TempDir& dir, const fs::path& cfg, const std::string& prefix,
                        const std::string& args, double min_drop = 0.1) {
  lowbit_run(prefix, cfg, "--set run.name=straight " + args);
  const fs::path half = dir / "straight" / "checkpoints" / "step_00000006";
  lowbit_run(prefix, cfg,
             "--set run.name=resumed --set run.resume=" + test::quote(half.string()) + " " + args);
  const auto expected =
      test::checkpoint_contents(dir / "straight" / "checkpoints" / "step_00000012");
  const auto got = test::checkpoint_contents(dir / "resumed" / "checkpoints" / "step_00000012");
  REQUIRE(expected.size() >= 3);
  REQUIRE(got.size() == expected.size());
  for (const auto& [file, bytes] : expected) {
    INFO(file);
    REQUIRE(got.count(file) == 1);
    CHECK(got.at(file) == bytes);
  }
  const auto losses = lowbit_losses(dir / "straight");
  REQUIRE(losses.size() == 12);
  INFO("loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < losses.front() - min_drop);
}

// Trains `optim` straight and resumed (check_resume_exact) and returns the final optimizer.pt.
std::string resumed_optimizer_state(const test::TempDir& dir, const std::string& optim,
                                    double min_drop = 0.1) {
  const fs::path cfg = dir / "run.yaml";
  test::write_text(cfg, lowbit_yaml(dir.path(), optim));
  check_resume_exact(dir, cfg, "", "", min_drop);
  return test::checkpoint_contents(dir / "straight" / "checkpoints" / "step_00000012")
      .at("optimizer.pt");
}

}  // namespace

TEST_CASE("frugal train with adamw8bit: the loss falls, resumed, the final checkpoint is identical",
          "[integration][optim]") {
  test::TempDir dir("frugal-lowbit");
  const std::string state = resumed_optimizer_state(
      dir, "{type: adamw8bit, lr: 0.003, weight_decay: 0.1, clip_grad_norm: 1.0, quant_block: 256}");
  // What optimizer.pt holds: uint8 codes and fp32 maxima per parameter.
  CHECK(state.find("exp_avg_sq_code") != std::string::npos);
  CHECK(state.find("exp_avg_absmax") != std::string::npos);
}

TEST_CASE("frugal train with adafactor: the loss falls, resumed, the final checkpoint is identical",
          "[integration][optim]") {
  test::TempDir dir("frugal-lowbit");
  const std::string state = resumed_optimizer_state(
      dir, "{type: adafactor, lr: 0.03, weight_decay: 0.1, clip_grad_norm: 1.0}");
  CHECK(state.find("exp_avg_sq_row") != std::string::npos);
  CHECK_FALSE(has_first_moment(state));
}

TEST_CASE("frugal train with adafactor's first moment (optim.beta1): resumed exactly",
          "[integration][optim]") {
  test::TempDir dir("frugal-lowbit");
  // The moment's average starts at zero, so the first steps are smaller: 4.178 -> 4.090 here.
  const std::string state = resumed_optimizer_state(
      dir, "{type: adafactor, lr: 0.03, weight_decay: 0.1, clip_grad_norm: 1.0, beta1: 0.9}",
      /*min_drop=*/0.05);
  CHECK(has_first_moment(state));
}

TEST_CASE("adamw8bit with strategy.offload.optimizer steps bit for bit as without",
          "[integration][optim][offload]") {
  test::TempDir dir("frugal-lowbit");
  const fs::path cfg = dir / "q.yaml";
  test::write_text(cfg, lowbit_yaml(dir.path(), "{type: adamw8bit, lr: 0.003, weight_decay: 0.1}"));
  lowbit_run("", cfg, "--set run.name=plain --set train.max_steps=6");
  lowbit_run("", cfg,
             "--set run.name=offload --set train.max_steps=6 "
             "--set strategy.offload.optimizer=true");
  const auto a = test::checkpoint_contents(dir / "plain" / "checkpoints" / "step_00000006");
  const auto b = test::checkpoint_contents(dir / "offload" / "checkpoints" / "step_00000006");
  for (const char* file : {"model.pt", "optimizer.pt"}) {
    INFO(file);
    CHECK(a.at(file) == b.at(file));
  }
}

TEST_CASE("adamw8bit under zero2 at 2 ranks: the loss falls, resumed, the final checkpoint is "
          "identical", "[integration][optim][multiproc]") {
  test::TempDir dir("frugal-lowbit");
  const fs::path cfg = dir / "z.yaml";
  test::write_text(cfg, lowbit_yaml(dir.path(), "{type: adamw8bit, lr: 0.003, weight_decay: 0.1, "
                                                "clip_grad_norm: 1.0}"));
  check_resume_exact(dir, cfg, "launch --nproc-per-node 2 --master-port 0 -- ",
                     "--set strategy.sharding.mode=zero2");
}

TEST_CASE("adamw8bit state saved in zero2's shards is refused by another layout, by name",
          "[integration][optim][multiproc]") {
  test::TempDir dir("frugal-lowbit");
  const fs::path cfg = dir / "z.yaml";
  test::write_text(cfg, lowbit_yaml(dir.path(), "{type: adamw8bit, lr: 0.003}"));
  lowbit_run("launch --nproc-per-node 2 --master-port 0 -- ", cfg,
             "--set run.name=zero2 --set train.max_steps=6 --set strategy.sharding.mode=zero2");
  const fs::path ckpt = dir / "zero2" / "checkpoints" / "step_00000006";
  test::CommandResult r = test::frugal("train " + test::quote(cfg.string()) +
                                       " --set run.name=single --set strategy.accumulation=2"
                                       " --set run.resume=" +
                                       test::quote(ckpt.string()));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("(8-bit codes or factored moments) belongs to the layout that wrote it") !=
        std::string::npos);
  CHECK(r.err.find("resume with the same strategy.sharding.mode and number of ranks") !=
        std::string::npos);
}
