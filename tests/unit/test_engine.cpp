#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <catch2/catch.hpp>

#include "frugal/engine/engine.h"
#include "frugal/models/gpt.h"
#include "frugal/models/mlp.h"
#include "frugal/optim/clip.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

// The gradients one step leaves for the optimizer (Engine::forward_backward), with
// `accumulation` micro-batches; the update after them has lr 0.
std::vector<at::Tensor> grads_after(const std::shared_ptr<Model>& model, const Batch& batch,
                                    int64_t accumulation) {
  StrategyConfig sc;
  sc.accumulation = accumulation;
  Engine engine(EngineOptions{sc, 0.0});
  engine.setup(model, std::make_shared<torch::optim::SGD>(model->parameters(),
                                                          torch::optim::SGDOptions(0.0)));
  engine.forward_backward(
      batch, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
  std::vector<at::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
  engine.optimizer_step();
  return out;
}

Batch token_batch(int64_t B, int64_t T, int64_t vocab) {
  return Batch{at::randint(0, vocab, {B, T}, at::kLong), at::randint(0, vocab, {B, T}, at::kLong)};
}

}  // namespace

TEST_CASE("split_batch splits along dim 0 and refuses too many parts", "[unit][engine]") {
  Batch b{at::arange(10).view({5, 2}), at::arange(5)};
  auto parts = split_batch(b, 2);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].size() == 3);
  CHECK(parts[1].size() == 2);
  CHECK(at::equal(at::cat({parts[0].x, parts[1].x}), b.x));
  CHECK_THROWS(split_batch(b, 6));
}

TEST_CASE("accumulation over k micro-batches gives the gradients of one batch",
          "[unit][engine]") {
  at::manual_seed(3);
  auto gpt = std::make_shared<Gpt>(GptOptions::sized(40, 12, 2, 2, 16));
  Batch batch = token_batch(8, 12, 40);
  auto g1 = grads_after(gpt, batch, 1);
  for (int64_t k : {2, 4, 8}) {
    auto gk = grads_after(gpt, batch, k);
    for (size_t i = 0; i < g1.size(); ++i) {
      // fp32 summation order differs; 1e-5 relative to the gradient's scale.
      const double scale = g1[i].abs().max().item<double>() + 1e-12;
      CHECK((gk[i] - g1[i]).abs().max().item<double>() / scale < 1e-5);
    }
  }
}

TEST_CASE("engine steps: accumulation leaves the trajectory unchanged", "[unit][engine]") {
  auto run = [](int64_t accumulation) {
    at::manual_seed(4);
    auto model = std::make_shared<Mlp>(6, std::vector<int64_t>{16}, 3);
    OptimConfig oc;
    oc.type = "adamw";
    oc.lr = 1e-2;
    oc.weight_decay = 0.1;
    StrategyConfig sc;
    sc.accumulation = accumulation;
    Engine engine(EngineOptions{sc, /*clip_grad_norm=*/0.5});
    engine.setup(model, make_optimizer(oc, *model));
    at::manual_seed(5);
    std::vector<StepStats> stats;
    for (int i = 0; i < 5; ++i) {
      Batch b{at::randn({12, 6}), at::randint(0, 3, {12}, at::kLong)};
      stats.push_back(engine.step(b, [&](const Batch& mb) {
        return model->loss_sum(model->forward(mb.x), mb.y);
      }));
    }
    CHECK(engine.steps_done() == 5);
    CHECK(stats.back().step == 5);
    return std::make_pair(model->parameters(), stats);
  };
  auto [p1, s1] = run(1);
  auto [p3, s3] = run(3);
  for (size_t i = 0; i < p1.size(); ++i) {
    CHECK((p1[i] - p3[i]).abs().max().item<double>() < 1e-5);
  }
  for (size_t i = 0; i < s1.size(); ++i) {
    CHECK(s3[i].loss == Approx(s1[i].loss).epsilon(1e-5));
    CHECK(s3[i].grad_norm == Approx(s1[i].grad_norm).epsilon(1e-5));
  }
}

TEST_CASE("forward_backward + optimizer_step is step(), and gradients can be edited between",
          "[unit][engine]") {
  // mode: 0 = step(), 1 = the two halves, 2 = the halves with the first layer's gradients
  // zeroed between them (SGD without momentum or decay then leaves that layer as it was).
  auto run = [](int mode, const char* precision) {
    at::manual_seed(4);
    auto model = std::make_shared<Mlp>(6, std::vector<int64_t>{16}, 3);
    StrategyConfig sc;
    sc.accumulation = 3;
    sc.precision = precision;
    Engine engine(EngineOptions{sc, /*clip_grad_norm=*/0.5});
    engine.setup(model, std::make_shared<torch::optim::SGD>(model->parameters(),
                                                            torch::optim::SGDOptions(0.1)));
    at::manual_seed(5);
    std::vector<double> losses, norms;
    for (int i = 0; i < 4; ++i) {
      Batch b{at::randn({12, 6}), at::randint(0, 3, {12}, at::kLong)};
      auto loss_fn = [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); };
      StepStats st;
      if (mode == 0) {
        st = engine.step(b, loss_fn);
      } else {
        const StepStats half = engine.forward_backward(b, loss_fn);
        if (mode == 2) model->parameters().front().mutable_grad().zero_();
        st = engine.optimizer_step();
        CHECK(st.loss == half.loss);
      }
      losses.push_back(st.loss);
      norms.push_back(st.grad_norm);
    }
    CHECK(engine.steps_done() == 4);
    return std::make_tuple(model->parameters(), losses, norms);
  };
  for (const char* precision : {"fp32", "bf16-mixed"}) {
    SECTION(precision) {
      const auto [p0, l0, n0] = run(0, precision);
      const auto [p1, l1, n1] = run(1, precision);
      for (size_t i = 0; i < p0.size(); ++i) CHECK(at::equal(p0[i], p1[i]));
      CHECK(l0 == l1);
      CHECK(n0 == n1);
    }
  }
  at::manual_seed(4);
  const at::Tensor first_before =
      std::make_shared<Mlp>(6, std::vector<int64_t>{16}, 3)->parameters().front().detach().clone();
  const auto [p2, l2, n2] = run(2, "fp32");
  CHECK(at::equal(p2.front(), first_before));  // edited to zero: not moved
  const auto [p0, l0, n0] = run(0, "fp32");
  CHECK_FALSE(at::equal(p0.front(), first_before));
  CHECK(n2.front() < n0.front());  // the norm and clipping see the edited gradients
}

TEST_CASE("the step's halves refuse to be called out of order", "[unit][engine][bad_input]") {
  auto model = std::make_shared<Mlp>(6, std::vector<int64_t>{16}, 3);
  Engine engine(EngineOptions{StrategyConfig{}, 0.0});
  engine.setup(model, std::make_shared<torch::optim::SGD>(model->parameters(),
                                                          torch::optim::SGDOptions(0.1)));
  CHECK_THROWS_WITH(engine.optimizer_step(),
                    "Engine::optimizer_step: call forward_backward() first (or step() for both)");
  Batch b{at::randn({4, 6}), at::randint(0, 3, {4}, at::kLong)};
  auto loss_fn = [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); };
  engine.forward_backward(b, loss_fn);
  CHECK_THROWS_WITH(
      engine.forward_backward(b, loss_fn),
      "Engine::forward_backward: the previous step's optimizer_step() was not called");
  CHECK_THROWS_WITH(
      engine.step(b, loss_fn),
      "Engine::forward_backward: the previous step's optimizer_step() was not called");
  engine.optimizer_step();
  CHECK(engine.step(b, loss_fn).step == 2);
}

TEST_CASE("clipping scales gradients to the max norm", "[unit][optim]") {
  at::Tensor a = at::zeros({2}, at::requires_grad()), b = at::zeros({1}, at::requires_grad());
  a.mutable_grad() = at::tensor({3.0f, 0.0f});
  b.mutable_grad() = at::tensor({4.0f});
  const double norm = std::sqrt(grad_norm_squared({a, b}).item<double>());
  CHECK(norm == Approx(5.0));
  clip_grads({a, b}, norm, 1.0);
  CHECK(std::sqrt(grad_norm_squared({a, b}).item<double>()) == Approx(1.0).epsilon(1e-5));
  clip_grads({a, b}, 1.0, 10.0);  // under the limit: untouched
  CHECK(b.grad().item<float>() == Approx(0.8f).epsilon(1e-5));
}
