// Exact resume: 20 steps straight and 10 + resume + 10 give bit-identical parameters on CPU,
// with dropout on (RNG state), shuffled data from worker threads (loader position) and AdamW
// (optimizer state).
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/adamw.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/config/load.h"
#include "frugal/engine/state.h"
#include "frugal/io/checkpoint.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/train/trainer.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

Config tiny_config(const std::filesystem::path& runs, const std::string& name, int64_t max_steps,
                   const std::string& strategy = "{accumulation: 2}") {
  const std::string yaml = fmt::format(R"(
run: {{name: {}, dir: '{}', seed: 7, resume: auto}}
model: {}
data: {{type: synthetic, micro_batch_size: 4, num_workers: 2, synthetic_samples: 256}}
optim: {{type: adamw, lr: 0.003, weight_decay: 0.1, clip_grad_norm: 1.0}}
schedule: {{type: cosine, warmup_steps: 3, decay_steps: 20, min_lr: 0.0003}}
train: {{max_steps: {}, log_every: 1, checkpoint_every: 5, keep_last: 10, eval_batches: 2, progress: none}}
strategy: {}
)",
                                       name, runs.string(),
                                       test::transformer_yaml("gpt", 2, 2, 32, 16, 64,
                                                              "dropout: 0.1"),
                                       max_steps, strategy);
  return load_config_string(yaml, "<resume test>");
}

}  // namespace

TEST_CASE("10 steps + resume + 10 steps equals 20 steps bit for bit", "[integration][resume]") {
  test::TempDir runs("frugal-resume");
  TrainResult straight = Trainer(tiny_config(runs.path(), "straight", 20)).run();
  REQUIRE(straight.steps == 20);

  TrainResult first = Trainer(tiny_config(runs.path(), "split", 10)).run();
  REQUIRE(first.steps == 10);
  TrainResult second = Trainer(tiny_config(runs.path(), "split", 20)).run();
  REQUIRE(second.resumed_from == 10);
  REQUIRE(second.steps == 20);

  Checkpoint a = load_checkpoint(straight.last_checkpoint);
  Checkpoint b = load_checkpoint(second.last_checkpoint);
  REQUIRE(a.model.size() == b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    INFO(a.model[i].first);
    CHECK(a.model[i].first == b.model[i].first);
    CHECK(at::equal(a.model[i].second, b.model[i].second));
  }
  // The optimizer state by parameter name: every moment and step count equal.
  REQUIRE(a.optimizer.size() == b.optimizer.size());
  REQUIRE_FALSE(a.optimizer.empty());
  for (size_t i = 0; i < a.optimizer.size(); ++i) {
    INFO(a.optimizer[i].first);
    CHECK(a.optimizer[i].first == b.optimizer[i].first);
    CHECK(at::equal(a.optimizer[i].second, b.optimizer[i].second));
  }
  CHECK(straight.last_loss == second.last_loss);
  // The metrics of the resumed run describe one history: a training row for each of steps
  // 1..20, once (evaluation rows, the final one of each run among them, are rows of their own).
  std::map<int64_t, int> training_rows;
  std::istringstream lines(test::read_text(second.run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("loss")) ++training_rows[row.at("step").get<int64_t>()];
  }
  CHECK(training_rows.size() == 20);
  for (int s = 1; s <= 20; ++s) {
    INFO("step " << s);
    CHECK(training_rows[s] == 1);
  }
}

TEST_CASE("resume is exact with fp16-mixed (scaler state) and checkpointing", "[integration][resume]") {
  test::TempDir runs("frugal-resume16");
  const std::string strategy =
      "{precision: fp16-mixed, grad_scaler: {init_scale: 256, growth_interval: 3}, "
      "checkpointing: {policy: every_k, k: 2}, accumulation: 2}";
  TrainResult straight = Trainer(tiny_config(runs.path(), "straight", 12, strategy)).run();
  Trainer(tiny_config(runs.path(), "split", 7, strategy)).run();
  TrainResult second = Trainer(tiny_config(runs.path(), "split", 12, strategy)).run();
  REQUIRE(second.resumed_from == 7);
  Checkpoint a = load_checkpoint(straight.last_checkpoint);
  Checkpoint b = load_checkpoint(second.last_checkpoint);
  for (size_t i = 0; i < a.model.size(); ++i) CHECK(at::equal(a.model[i].second, b.model[i].second));
  // The scaler grew from 256 (every 3 clean steps) and its state came back on resume.
  auto scale_of = [](const Checkpoint& c) {
    for (const auto& [name, t] : c.state) {
      if (name == "grad_scaler.scale") return t.item<double>();
    }
    return -1.0;
  };
  CHECK(scale_of(a) == scale_of(b));
  CHECK(scale_of(a) > 256.0);
}

TEST_CASE("keep_last prunes old checkpoints, resume at max_steps does nothing",
          "[integration][resume]") {
  test::TempDir runs("frugal-keep");
  Config cfg = tiny_config(runs.path(), "keep", 15);
  cfg.train.keep_last = 2;
  TrainResult r = Trainer(cfg).run();
  auto all = list_checkpoints(r.run_dir / "checkpoints");
  REQUIRE(all.size() == 2);
  CHECK(all[0].filename() == "step_00000010");
  CHECK(all[1].filename() == "step_00000015");
  TrainResult again = Trainer(cfg).run();
  CHECK(again.resumed_from == 15);
  CHECK(again.steps == 15);
  CHECK(list_checkpoints(r.run_dir / "checkpoints").size() == 2);
}

TEST_CASE("train.save_final false writes no checkpoint at the end, periodic ones stay",
          "[integration][resume]") {
  test::TempDir runs("frugal-save-final");
  Config cfg = tiny_config(runs.path(), "nofinal", 15);
  cfg.train.save_final = false;
  cfg.train.checkpoint_every = 0;
  TrainResult r = Trainer(cfg).run();
  CHECK(r.last_checkpoint.empty());
  CHECK_FALSE(std::filesystem::exists(r.run_dir / "checkpoints" / "step_00000015"));
  cfg.run.name = "periodic";
  cfg.train.checkpoint_every = 10;
  TrainResult p = Trainer(cfg).run();
  auto all = list_checkpoints(p.run_dir / "checkpoints");
  REQUIRE(all.size() == 1);
  CHECK(all[0].filename() == "step_00000010");
}

TEST_CASE("training on synthetic tokens lowers the loss", "[integration]") {
  test::TempDir runs("frugal-learn");
  Config cfg = tiny_config(runs.path(), "learn", 60);
  cfg.model.dropout = 0.0;
  cfg.train.checkpoint_every = 0;
  TrainResult r = Trainer(cfg).run();
  std::string metrics = test::read_text(r.run_dir / "metrics.jsonl");
  auto first_loss = nlohmann::json::parse(metrics.substr(0, metrics.find('\n')))["loss"].get<double>();
  CHECK(first_loss == Approx(std::log(64.0)).epsilon(0.1));
  CHECK(r.last_loss < first_loss * 0.8);
}
