// User code registers its own strategies by name; YAML and the engine then accept them like
// the built-in ones. (Each CTest case runs in its own process, so registrations here do not
// leak into other tests' expected error messages.)
#include <ATen/ATen.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/config/named_registry.h"
#include "frugal/config/strategy_names.h"
#include "frugal/engine/engine.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/models/gpt.h"
#include "frugal/models/registry.h"
#include "frugal/models/unit.h"
#include "frugal/optim/optimizer.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/precision.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

Batch tiny_batch() {
  at::Tensor seq = at::randint(0, 32, {4, 9}, at::kLong);
  return Batch{seq.slice(1, 0, 8), seq.slice(1, 1, 9)};
}

}  // namespace

TEST_CASE("a registered checkpointing policy is chosen by name from YAML", "[unit][strategy]") {
  // Before registration, YAML names the known policies.
  CHECK_THROWS_WITH(load_config_string("strategy: {checkpointing: last_half}\n", "c.yaml"),
                    Catch::Contains("unknown value 'last_half' (expected one of: none, full, "
                                    "every_k, selective)"));
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
                        Catch::Contains("ddp, none, zero1, zero2, zero3"));
  ModelConfig mc;
  mc.type = "nope";
  CHECK_THROWS_WITH(make_model(mc), Catch::StartsWith("model.type: unknown model 'nope' (known: "));
  CHECK_THROWS_WITH(Precision("fp7"),
                    Catch::StartsWith("strategy.precision: unknown precision 'fp7'"));
}
