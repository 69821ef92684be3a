// Optimizer offload on a CPU-only machine: host to host, yet real copies. The optimizer steps
// separate master tensors, and training is bit for bit the plain run's (the same optimizer
// steps the same values), for AdamW and SGD with momentum, with accumulation, bf16-mixed and
// clipping; a bf16 model's masters are fp32.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "frugal/engine/engine.h"
#include "frugal/strategy/offload.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

struct Trained {
  std::vector<at::Tensor> params;
  std::vector<double> losses;
};

Trained train(StrategyConfig sc, const OptimConfig& oc, int64_t steps, double clip = 0.5,
              int64_t* pipelined = nullptr) {
  at::manual_seed(4);
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
  Engine engine(EngineOptions{sc, clip});
  engine.setup(model, make_optimizer(oc, *model));
  Trained out;
  at::manual_seed(5);
  for (int64_t s = 0; s < steps; ++s) {
    Batch b{at::randint(0, 32, {4, 16}, at::kLong), at::randint(0, 32, {4, 16}, at::kLong)};
    out.losses.push_back(
        engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); })
            .loss);
  }
  for (const auto& p : model->parameters()) out.params.push_back(p.detach().clone());
  if (pipelined != nullptr) *pipelined = engine.offload() ? engine.offload()->pipelined_last_step() : 0;
  return out;
}

}  // namespace

TEST_CASE("optimizer offload trains exactly as the plain run", "[unit][offload]") {
  struct Variant {
    const char* name;
    const char* optim;
    const char* precision;
    int64_t accumulation;
  };
  for (Variant v : {Variant{"adamw", "adamw", "fp32", 1}, Variant{"sgd", "sgd", "fp32", 1},
                    Variant{"adamw accumulation bf16-mixed", "adamw", "bf16-mixed", 2}}) {
    SECTION(v.name) {
      OptimConfig oc;
      oc.type = v.optim;
      oc.lr = 3e-3;
      oc.momentum = 0.9;
      oc.weight_decay = 0.1;
      StrategyConfig sc;
      sc.precision = v.precision;
      sc.accumulation = v.accumulation;
      const Trained plain = train(sc, oc, 5);
      sc.offload.optimizer = true;
      const Trained offloaded = train(sc, oc, 5);
      CHECK(offloaded.losses == plain.losses);
      REQUIRE(offloaded.params.size() == plain.params.size());
      for (size_t i = 0; i < plain.params.size(); ++i) CHECK(at::equal(offloaded.params[i], plain.params[i]));
    }
  }
}

TEST_CASE("without clipping or loss scaling, offload steps parameters during backward, exactly",
          "[unit][offload]") {
  for (int64_t accumulation : {1, 3}) {
    SECTION("accumulation " + std::to_string(accumulation)) {
      OptimConfig oc;
      oc.lr = 3e-3;
      oc.weight_decay = 0.1;
      StrategyConfig sc;
      sc.accumulation = accumulation;
      sc.checkpointing.policy = "full";
      const Trained plain = train(sc, oc, 4, /*clip=*/0.0);
      sc.offload.optimizer = true;
      int64_t pipelined = 0;
      const Trained offloaded = train(sc, oc, 4, /*clip=*/0.0, &pipelined);
      // Every parameter was handed to the host thread as its gradient became final.
      at::manual_seed(4);
      const auto count = static_cast<int64_t>(Gpt(GptOptions::sized(32, 16, 2, 2, 32)).parameters().size());
      CHECK(pipelined == count);
      CHECK(offloaded.losses == plain.losses);
      for (size_t i = 0; i < plain.params.size(); ++i) CHECK(at::equal(offloaded.params[i], plain.params[i]));
    }
  }
}

TEST_CASE("optimizer offload steps separate fp32 masters on the host", "[unit][offload]") {
  at::manual_seed(4);
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
  model->to(at::kBFloat16);
  StrategyConfig sc;
  sc.offload.optimizer = true;
  Engine engine(EngineOptions{sc, 0.0});
  OptimConfig oc;
  engine.setup(model, make_optimizer(oc, *model));
  int64_t model_bytes = 0, count = 0;
  for (const auto& p : model->parameters()) {
    model_bytes += static_cast<int64_t>(p.nbytes());
    const at::Tensor master = engine.optimizer_param(p);
    CHECK(master.scalar_type() == at::kFloat);  // bf16 model, fp32 masters
    CHECK(master.device().is_cpu());
    CHECK(master.data_ptr() != p.data_ptr());
    CHECK(at::equal(master.to(at::kBFloat16), p.detach()));
    ++count;
  }
  // Masters and their gradients: twice the fp32 size of the bf16 parameters, twice.
  CHECK(engine.offload()->host_bytes() == 4 * model_bytes);
  size_t in_optimizer = 0;
  for (const auto& g : engine.optimizer().param_groups()) in_optimizer += g.params().size();
  CHECK(static_cast<int64_t>(in_optimizer) == count);
  // A stepped optimizer cannot be offloaded any more: its state belongs to other tensors.
  auto stepped = make_optimizer(oc, *model);
  for (auto& p : model->parameters()) p.mutable_grad() = at::zeros_like(p);
  stepped->step();
  CHECK_THROWS_AS(OptimizerOffload(*stepped, true), Error);
}

TEST_CASE("optimizer offload keeps one host gradient buffer per parameter across steps",
          "[unit][offload]") {
  // zero_grad(set_to_none) drops the masters' .grad every step; the buffer made at setup
  // (pinned when CUDA is present) must come back, not a fresh pageable allocation.
  at::manual_seed(4);
  auto model = std::make_shared<Gpt>(GptOptions::sized(32, 16, 2, 2, 32));
  StrategyConfig sc;
  sc.offload.optimizer = true;
  Engine engine(EngineOptions{sc, 0.5});
  engine.setup(model, make_optimizer(OptimConfig{}, *model));
  auto step = [&] {
    Batch b{at::randint(0, 32, {4, 16}, at::kLong), at::randint(0, 32, {4, 16}, at::kLong)};
    engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
  };
  std::vector<at::Tensor> buffers;
  for (const auto& p : model->parameters()) buffers.push_back(engine.optimizer_param(p).grad());
  // Each step copies its gradients into those same buffers: their contents change every
  // step (a stand-in buffer would leave them at the first step's gradients).
  std::vector<at::Tensor> before;
  for (int s = 0; s < 3; ++s) {
    step();
    std::vector<at::Tensor> now;
    for (const auto& b : buffers) now.push_back(b.clone());
    if (!before.empty()) {
      for (size_t i = 0; i < now.size(); ++i) CHECK_FALSE(at::equal(now[i], before[i]));
    }
    before = std::move(now);
  }
}
