// Targets equal to kIgnoreIndex (-100) are no loss terms: the engine divides the summed loss by
// the targets that count, so a step with a third of its targets ignored, cut into 3
// micro-batches, gives PyTorch's mean cross-entropy with ignore_index and its gradients.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "frugal/data/batch.h"
#include "frugal/engine/engine.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"

using namespace frugal;

TEST_CASE("ignored targets are left out of the count the loss is divided by", "[unit][engine]") {
  at::manual_seed(6);
  Batch b{at::randint(0, 32, {6, 8}, at::kLong), at::randint(0, 32, {6, 8}, at::kLong)};
  // A third of the targets ignored, unevenly over the micro-batches (rows 0-1 keep all).
  at::Tensor drop = at::rand({6, 8}) < 0.5;
  drop.narrow(0, 0, 2).fill_(false);
  b.y.masked_fill_(drop, kIgnoreIndex);
  const int64_t kept = (b.y != kIgnoreIndex).sum().item<int64_t>();
  REQUIRE(b.num_targets() == kept);
  REQUIRE(kept < 40);
  CHECK(Batch{b.x, b.y.to(at::kFloat)}.num_targets() == 48);  // regression targets all count

  auto model_of = [] {
    at::manual_seed(7);
    return std::make_shared<Gpt>(GptOptions::sized(32, 8, 2, 2, 16));
  };
  // PyTorch's mean with ignore_index, in one piece.
  auto reference = model_of();
  at::Tensor logits = reference->forward(b.x);
  at::Tensor mean = at::cross_entropy_loss(logits.reshape({-1, 32}), b.y.reshape({-1}), {},
                                           at::Reduction::Mean, kIgnoreIndex);
  mean.backward();

  auto model = model_of();
  StrategyConfig sc;
  sc.accumulation = 3;
  Engine engine(EngineOptions{sc, 0.0});
  OptimConfig oc;
  oc.type = "sgd";
  oc.lr = 0.0;
  engine.setup(model, make_optimizer(oc, *model));
  const StepStats st = engine.forward_backward(
      b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
  CHECK(st.targets == kept);
  CHECK(std::abs(st.loss - mean.item<double>()) < 1e-6);
  auto a = reference->parameters(), e = model->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK((a[i].grad() - e[i].grad()).abs().max().item<double>() < 1e-6);
  }
  engine.optimizer_step();
}
