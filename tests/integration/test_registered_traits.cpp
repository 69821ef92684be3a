// A sharding mode, a precision, an optimizer and a schedule registered from user code are
// treated by what they are (their traits, their spec), not by their names: validation, the
// trainer, the non-finite guard, the planner and the out-of-memory advice each handle them
// like the built-in one they resemble. (Registrations last for the process, which the file's
// other cases share: each case registers names of its own.)
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "frugal/config/load.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/memory/oom_advice.h"
#include "frugal/memory/planner.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/optim/schedule.h"
#include "frugal/strategy/precision.h"
#include "frugal/train/nonfinite_guard.h"
#include "frugal/train/trainer.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;

namespace test_registered_traits {

Config tiny(const std::filesystem::path& runs, const std::string& name, const std::string& extra) {
  const std::string yaml = fmt::format(R"(
run: {{name: {}, dir: '{}', seed: 3}}
model: {}
data: {{type: synthetic, micro_batch_size: 4, synthetic_samples: 64}}
train: {{max_steps: 3, log_every: 1, checkpoint_every: 0, progress: none}}
{}
)",
                                       name, runs.string(),
                                       test::transformer_yaml("gpt", 2, 2, 32, 16, 64), extra);
  return load_config_string(yaml, "<traits test>");
}

std::string validation_error(const std::string& yaml) {
  try {
    (void)load_config_string(yaml, "c.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace test_registered_traits

using namespace test_registered_traits;

TEST_CASE("registered strategies are treated by their traits everywhere",
          "[integration][strategy]") {
  // A precision that scales the loss like fp16-mixed (in bf16) and a mode that shards like
  // zero3 without being called zero3.
  register_precision("scaled-bf16", {true, at::kBFloat16, /*loss_scaling=*/true});
  auto plain = [](const ShardingConfig&, std::shared_ptr<dist::Communicator>) {
    return std::make_shared<Sharding>();
  };
  register_sharding("my-sharded", plain, {true, true, true, true});

  // Validation: optimizer in backward refuses any loss-scaling precision; adafactor any mode
  // that shards optimizer state; parameter offload needs a mode that shards parameters.
  CHECK_THAT(validation_error("optim: {in_backward: true}\nstrategy: {precision: scaled-bf16}\n"),
             Catch::Contains("optim.in_backward: cannot run with scaled-bf16"));
  CHECK_THAT(validation_error("optim: {type: adafactor}\nstrategy: {sharding: my-sharded}\n"),
             Catch::Contains("adafactor cannot run with strategy.sharding.mode my-sharded"));
  CHECK(validation_error("strategy: {sharding: my-sharded, offload: {params: true}}\n").empty());
  CHECK_THAT(validation_error("strategy: {sharding: ddp, offload: {params: true}}\n"),
             Catch::Contains("strategy.offload.params"));

  // The non-finite guard: an overflow skipped under a loss-scaling precision is its scaler's
  // business, not a reason to halt; under fp32 halt stops the run.
  StepStats overflow;
  overflow.step = 4;
  overflow.loss = 2.0;
  overflow.skipped = true;
  NonFiniteGuard scaled({"halt", 20, "scaled-bf16"});
  CHECK_THAT(scaled.check(overflow, false), Catch::Contains("update skipped"));
  NonFiniteGuard plain_fp32({"halt", 20, "fp32"});
  CHECK_THROWS_WITH(plain_fp32.check(overflow, false), Catch::Contains("train.on_nonfinite: halt"));
  NonFiniteGuard stopping({"skip", 2, "scaled-bf16"});
  (void)stopping.check(overflow, false);
  CHECK_THROWS_WITH(stopping.check(overflow, false),
                    Catch::Contains("scaled-bf16's loss scale is down to"));

  // The planner lists every data-parallel mode on several GPUs, the registered one included,
  // and predicts it like zero3.
  memory::ModelProfile profile;
  profile.params = 1000;
  profile.largest_block = 100;
  profile.root = 50;
  profile.measured_batch = 1;
  profile.activations[memory::ActivationKey{}.str()] = 0;
  Config cfg;
  memory::PlanOptions options;
  options.gpus = 4;
  std::map<std::string, int64_t> peak_of;
  for (const auto& row : memory::plan(cfg, profile, options)) {
    if (row.precision == "fp32" && !row.offload && !row.in_backward)
      peak_of[row.sharding] = row.peak_bytes;
  }
  REQUIRE(peak_of.count("my-sharded") == 1);
  REQUIRE(peak_of.count("zero3") == 1);
  CHECK(peak_of.count("none") == 0);
  CHECK(peak_of["my-sharded"] == peak_of["zero3"]);

  // The out-of-memory advice spares a mode that already shards parameters the zero3 advice.
  Config oom;
  oom.strategy.sharding.mode = "my-sharded";
  memory::OomFigures f;
  f.state_bytes = 16 << 20;
  f.peak_bytes = 80 << 20;
  for (const auto& a : memory::oom_advice(oom, f)) CHECK(a.find("zero3 over") == std::string::npos);
}

TEST_CASE("a registered optimizer and schedule train from YAML like the built-in ones",
          "[integration][strategy]") {
  test::TempDir runs("frugal-registered");
  // "my-sgd" builds torch's SGD over the two groups; "halving" halves the rate each step.
  register_optimizer("my-sgd", [](const OptimConfig& c, const OptimizerGroups& g) {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(g.decay, std::make_unique<torch::optim::SGDOptions>(
                                     torch::optim::SGDOptions(c.lr).weight_decay(c.weight_decay)));
    groups.emplace_back(g.no_decay, std::make_unique<torch::optim::SGDOptions>(
                                        torch::optim::SGDOptions(c.lr).weight_decay(0.0)));
    return std::make_shared<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(c.lr));
  });
  register_schedule("halving", [](const ScheduleConfig&, double base, double, int64_t step) {
    return base / static_cast<double>(int64_t{1} << step);
  });
  CHECK_THROWS_WITH(register_optimizer("adamw", nullptr), Catch::Contains("empty"));
  CHECK_THROWS_WITH(register_schedule("cosine", [](const ScheduleConfig&, double b, double,
                                                   int64_t) { return b; }),
                    Catch::Contains("'cosine' is already a schedule"));
  ScheduleConfig halving_cfg;
  halving_cfg.type = "halving";
  const LrSchedule halving(halving_cfg, 0.4, 10);
  CHECK(halving.lr_at(0) == 0.4);
  CHECK(halving.lr_at(2) == 0.1);

  // The registered pair trains exactly as the built-in sgd with the same rates would: the
  // registered schedule's rates are passed to the built-in run's steps through a step schedule
  // (gamma 0.5 every step).
  const TrainResult mine = Trainer(tiny(runs.path(), "mine",
                                        "optim: {type: my-sgd, lr: 0.4, weight_decay: 0.1}\n"
                                        "schedule: {type: halving}\n"))
                               .run();
  const TrainResult builtin = Trainer(tiny(runs.path(), "builtin",
                                           "optim: {type: sgd, lr: 0.4, weight_decay: 0.1}\n"
                                           "schedule: {type: step, gamma: 0.5, step_size: 1}\n"))
                                  .run();
  CHECK(mine.steps == 3);
  CHECK(mine.last_loss == builtin.last_loss);
  CHECK_THAT(validation_error("optim: {type: my-sgdd}\n"),
             Catch::Contains("expected one of: adamw, adam, sgd, adamw8bit, adafactor, my-sgd"));
}

TEST_CASE("a model type registered with a spec is validated and fed like a built-in one",
          "[integration][models]") {
  test::TempDir runs("frugal-registered-model");
  // "wide-mlp" is the mlp classifier under another name, with one check of its own (its hidden
  // layers must be at least as wide as its input) and a rule of its own on one key.
  ModelSpec spec = *find_model_spec("mlp");
  const auto mlp_check = spec.check;
  spec.check = [mlp_check](const ModelConfig& m, const DataConfig& d, const ConfigCheck& c) {
    if (mlp_check) mlp_check(m, d, c);
    for (int64_t h : m.hidden)
      c.require(h >= m.in_features, "model.hidden",
                fmt::format("each layer must be at least in_features ({}) wide", m.in_features));
  };
  for (ModelKey& key : spec.keys)
    if (key.name == "out_features") key.rule = KeyRule::at_least(2);
  register_model("wide-mlp", spec);
  CHECK_THROWS_WITH(register_model("wide-mlp", spec), Catch::Contains("wide-mlp"));

  auto config_of = [&runs](const std::string& type) {
    return load_config_string(fmt::format(R"(
run: {{name: {0}, dir: '{1}', seed: 5}}
model: {{type: {0}, in_features: 8, hidden: [16], out_features: 3}}
data: {{type: synthetic, micro_batch_size: 4, synthetic_samples: 32}}
train: {{max_steps: 3, log_every: 1, checkpoint_every: 0, progress: none}}
)",
                                          type, runs.path().string()),
                              "c.yaml");
  };
  // Its own check and the mlp's, each naming the key and where it was written.
  CHECK_THAT(validation_error(
                 "model: {type: wide-mlp, in_features: 8,\n  hidden: [4], out_features: 3}\n"),
             Catch::Contains("c.yaml:2") && Catch::Contains("model.hidden") &&
                 Catch::Contains("at least in_features (8) wide"));
  // Its key's rule replaces the mlp's: one output is too few for it, and fine for the mlp.
  CHECK_THAT(
      validation_error("model: {type: wide-mlp, in_features: 8, hidden: [8], out_features: 1}\n"),
      Catch::Contains("c.yaml:1:") && Catch::Contains("model.out_features: must be >= 2, got 1"));
  CHECK(validation_error("model: {type: mlp, in_features: 8, hidden: [8], out_features: 1}\n") ==
        "");
  CHECK_THAT(
      validation_error("model: {type: mlp, in_features: 8, hidden: [8], out_features: 0}\n"),
      Catch::Contains("model.out_features: must be >= 1, got 0"));
  // The language-model keys it does not read stay out of the resolved config.
  const Config cfg = config_of("wide-mlp");
  const std::string resolved = to_yaml(cfg);
  CHECK(resolved.find("in_features: 8") != std::string::npos);
  CHECK(resolved.find("n_head") == std::string::npos);
  // Synthetic feature data with labels below its 3 classes: it trains exactly as the mlp does.
  const TrainResult mine = Trainer(cfg).run();
  const TrainResult builtin = Trainer(config_of("mlp")).run();
  CHECK(mine.steps == 3);
  CHECK(std::isfinite(mine.last_loss));
  CHECK(mine.last_loss == builtin.last_loss);
}
