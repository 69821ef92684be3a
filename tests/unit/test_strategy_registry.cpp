// User code registers its own strategies by name; YAML and the engine then accept them like
// the built-in ones. (Registrations last for the process, which only this file's cases share:
// each case registers names of its own.)
#include <ATen/ATen.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "frugal/config/load.h"
#include "frugal/config/named_registry.h"
#include "frugal/config/strategy_names.h"
#include "frugal/engine/engine.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/memory/oom_advice.h"
#include "frugal/memory/planner.h"
#include "frugal/models/gpt.h"
#include "frugal/models/registry.h"
#include "frugal/models/unit.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/precision.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

// "dp opt grads params" with the traits that are set, so that a failure shows all four.
std::string traits_text(const ShardingTraits& t) {
  const std::pair<bool, const char*> all[] = {{t.data_parallel, "dp"},
                                              {t.shards_optimizer_state, "opt"},
                                              {t.shards_gradients, "grads"},
                                              {t.shards_parameters, "params"}};
  std::string out;
  for (const auto& [on, name] : all) {
    if (on) out += (out.empty() ? "" : " ") + std::string(name);
  }
  return out;
}

// A model of 1000 parameters (blocks of at most 100, 50 outside them) with no activations:
// predicted peaks are sums of the state terms alone.
memory::ModelProfile state_only_profile() {
  memory::ModelProfile p;
  p.params = 1000;
  p.largest_block = 100;
  p.root = 50;
  p.measured_batch = 1;
  return p;
}

int64_t predicted_peak(const std::string& mode, bool offload = false) {
  memory::PlanRow row;
  row.sharding = mode;
  row.offload = offload;
  return memory::predict_peak(state_only_profile(), row, /*world=*/4);
}

Batch tiny_batch() {
  at::Tensor seq = at::randint(0, 32, {4, 9}, at::kLong);
  return Batch{seq.slice(1, 0, 8), seq.slice(1, 1, 9)};
}

}  // namespace

TEST_CASE("a registered checkpointing policy is chosen by name from YAML", "[unit][strategy]") {
  // Before registration, YAML names the known policies.
  CHECK_THROWS_WITH(load_config_string("strategy: {checkpointing: last_half}\n", "c.yaml"),
                    Catch::Contains("unknown value 'last_half' (expected one of: none, full, "
                                    "every_k, selective, auto)"));
  register_checkpointing_policy("last_half", [](int64_t i, int64_t n, const CheckpointingConfig&) {
    return i >= n / 2 ? std::vector<std::string>{""} : std::vector<std::string>{};
  });
  Config cfg = load_config_string("strategy: {checkpointing: last_half}\n", "c.yaml");
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 8, 4, 2, 16));
  Engine engine(EngineOptions{cfg.strategy, 0.0});
  engine.setup(model, make_optimizer(cfg.optim, *model));
  for (int i = 0; i < 4; ++i) {
    auto* block = model->blocks[i]->as<GptBlock>();
    CHECK(block->has_wrapper(kCheckpointWrapperName) == (i >= 2));
  }
  CHECK_THROWS_AS(register_checkpointing_policy("full", {}), std::invalid_argument);
}

TEST_CASE("a registered precision is chosen by name", "[unit][strategy]") {
  register_precision("fp16-mixed-unscaled", {true, at::kHalf, false});
  Config cfg = load_config_string("strategy: {precision: fp16-mixed-unscaled}\n", "c.yaml");
  Precision p(cfg.strategy.precision, cfg.strategy.grad_scaler);
  CHECK(p.autocast_enabled());
  CHECK(p.autocast_dtype() == at::kHalf);
  CHECK(p.scaler() == nullptr);
  CHECK_THROWS_WITH(load_config_string("strategy: {precision: fp16-mixed-unscale}\n", "c.yaml"),
                    Catch::Contains("(did you mean 'fp16-mixed-unscaled'?)"));
  CHECK_THROWS_AS(register_precision("bf16-mixed", {}), Error);
}

TEST_CASE("a registered sharding strategy drives the engine's step hooks", "[unit][strategy]") {
  struct Counting : Sharding {
    std::string name() const override { return "counting"; }
    void begin_micro_step(int64_t index, int64_t count) override {
      calls.push_back(std::to_string(index) + "/" + std::to_string(count));
    }
    void finish_gradients() override { calls.push_back("finish"); }
    std::vector<std::string> calls;
  };
  auto counting = std::make_shared<Counting>();
  register_sharding("counting", [counting](const ShardingConfig&, std::shared_ptr<dist::Communicator>) {
    return counting;
  });
  Config cfg = load_config_string("strategy: {accumulation: 2, sharding: counting}\n", "c.yaml");
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 8, 1, 2, 16));
  Engine engine(EngineOptions{cfg.strategy, 0.0});
  engine.setup(model, make_optimizer(cfg.optim, *model));
  CHECK(engine.sharding().name() == "counting");
  engine.step(tiny_batch(), [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
  CHECK(counting->calls == std::vector<std::string>{"0/2", "1/2", "finish"});
}

TEST_CASE("one registry shape serves every named choice", "[unit][strategy]") {
  NamedRegistry<int> checked("strategy.precision", "precision", {{"fp32", 1}}, /*validated=*/true);
  CHECK(checked.get("fp32") == 1);
  CHECK_THROWS_WITH(checked.get("fp8"),
                    "strategy.precision: unknown precision 'fp8' (known: fp32)");
  // Adding a name to a validated key makes YAML accept it; a name taken is refused.
  checked.add("fp8-test", 2);
  CHECK_THROWS_WITH(checked.add("fp8-test", 3),
                    "strategy.precision: 'fp8-test' is already a precision");
  CHECK(checked.get("fp8-test") == 2);
  CHECK(checked.names() == std::vector<std::string>{"fp32", "fp8-test"});
  const auto accepted = strategy_names("strategy.precision");
  CHECK(std::find(accepted.begin(), accepted.end(), "fp8-test") != accepted.end());
  // An unvalidated key (model.type) registers nowhere else.
  NamedRegistry<int> models("model.type", "model", {}, /*validated=*/false);
  models.add("only-here", 1);
  CHECK_FALSE(models.find("elsewhere").has_value());
  CHECK_THROWS_WITH(models.add("", 1), "model.type: a registered model needs a name");
  CHECK_THROWS_WITH(register_model("gpt", [](const ModelConfig&) { return nullptr; }),
                    "model.type: 'gpt' is already a model");
  // The four built-in registries answer in that shape.
  CHECK_THROWS_WITH(make_sharding(ShardingConfig{.mode = "zero9"}, nullptr),
                    Catch::StartsWith("strategy.sharding.mode: unknown mode 'zero9' (known: ") &&
                        Catch::Contains("ddp, hsdp, none, zero1, zero2, zero3"));
  ModelConfig mc;
  mc.type = "nope";
  CHECK_THROWS_WITH(make_model(mc), Catch::StartsWith("model.type: unknown model 'nope' (known: "));
  CHECK_THROWS_WITH(Precision("fp7"),
                    Catch::StartsWith("strategy.precision: unknown precision 'fp7'"));
}

TEST_CASE("each built-in sharding mode says what it shards", "[unit][strategy]") {
  CHECK(traits_text(sharding_traits("none")) == "");
  CHECK(traits_text(sharding_traits("ddp")) == "dp");
  CHECK(traits_text(sharding_traits("zero1")) == "dp opt");
  CHECK(traits_text(sharding_traits("zero2")) == "dp opt grads");
  CHECK(traits_text(sharding_traits("zero3")) == "dp opt grads params");
  CHECK_THROWS_WITH(sharding_traits("zero9"),
                    Catch::StartsWith("strategy.sharding.mode: unknown mode 'zero9' (known: "));
  // The planner reads them: AdamW's 4 + 4 + 8 bytes per parameter over 4 ranks, zero2 and
  // zero3 keeping one whole unit of gradients (100 parameters), zero3 gathering the root and
  // two blocks (250 parameters).
  CHECK(predicted_peak("none") == 16000);
  CHECK(predicted_peak("ddp") == 16000);
  CHECK(predicted_peak("zero1") == 4000 + 4000 + 2000);
  CHECK(predicted_peak("zero2") == 4000 + (1000 + 400) + 2000);
  CHECK(predicted_peak("zero3") == (1000 + 1000) + (1000 + 400) + 2000);
  // Offloaded, a rank's host step covers what it steps: all of it, or its quarter.
  CHECK(predicted_peak("ddp", true) == 4000 + 4000 + (8 * 1000 + 8000));
  CHECK(predicted_peak("zero1", true) == 4000 + 4000 + (8 * 250 + 2000));
}

TEST_CASE("a registered sharding mode's traits are returned and planned with", "[unit][strategy]") {
  auto plain = [](const ShardingConfig&, std::shared_ptr<dist::Communicator>) {
    return std::make_shared<Sharding>();
  };
  register_sharding("traits-like-zero2", plain, {true, true, true, false});
  register_sharding("traits-default", plain);  // the two-argument form: shards nothing
  CHECK(traits_text(sharding_traits("traits-like-zero2")) == "dp opt grads");
  CHECK(traits_text(sharding_traits("traits-default")) == "");
  CHECK(predicted_peak("traits-like-zero2") == predicted_peak("zero2"));
  CHECK(predicted_peak("traits-like-zero2", true) == predicted_peak("zero2", true));
  CHECK(predicted_peak("traits-default") == predicted_peak("none"));
  // The out-of-memory advice asks the traits too: only a mode that shards parameters is
  // spared the zero3 advice.
  register_sharding("traits-like-zero3", plain, {true, true, true, true});
  auto advises_zero3 = [](const std::string& mode) {
    Config cfg;
    cfg.strategy.sharding.mode = mode;
    memory::OomFigures f;
    f.state_bytes = 16 << 20;
    f.peak_bytes = 80 << 20;
    for (const auto& a : memory::oom_advice(cfg, f)) {
      if (a.find("zero3 over") != std::string::npos) return true;
    }
    return false;
  };
  CHECK(advises_zero3("traits-like-zero2"));
  CHECK_FALSE(advises_zero3("traits-like-zero3"));
}

TEST_CASE("precisions and checkpointing policies answer what they do", "[unit][strategy]") {
  CHECK_FALSE(precision_spec("fp32").autocast);
  CHECK(precision_spec("bf16-mixed").autocast);
  CHECK(precision_spec("bf16-mixed").dtype == at::kBFloat16);
  CHECK_FALSE(precision_spec("bf16-mixed").loss_scaling);
  CHECK(precision_spec("fp16-mixed").dtype == at::kHalf);
  CHECK(precision_spec("fp16-mixed").loss_scaling);
  register_precision("spec-bf16-scaled", {true, at::kBFloat16, true});
  CHECK(precision_spec("spec-bf16-scaled").loss_scaling);
  CHECK_THROWS_WITH(precision_spec("fp7"),
                    Catch::StartsWith("strategy.precision: unknown precision 'fp7'"));

  CHECK(checkpointing_kind("none") == CheckpointingKind::none);
  CHECK(checkpointing_kind("full") == CheckpointingKind::full);
  CHECK(checkpointing_kind("every_k") == CheckpointingKind::every_k);
  CHECK(checkpointing_kind("selective") == CheckpointingKind::selective);
  CHECK(checkpointing_kind("last_half") == CheckpointingKind::registered);
  CheckpointingConfig c;
  CHECK_FALSE(checkpointing_enabled(c));  // the default is none
  for (const std::string policy : {"full", "every_k", "selective", "last_half"}) {
    c.policy = policy;
    CHECK(checkpointing_enabled(c));
  }
}
