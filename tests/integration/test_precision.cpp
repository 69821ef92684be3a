// Mixed precision on CPU: bf16-mixed and fp16-mixed train a tiny GPT to within a stated
// tolerance of fp32, and fp16-mixed's scaler skips an overflowing step and backs off.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>

#include "frugal/engine/engine.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"

using namespace frugal;

namespace {

GptOptions tiny() { return GptOptions::sized(32, 16, 2, 2, 32); }

// A learnable batch: next token = (token + 1) mod vocab.
Batch counting_batch(int64_t B, int64_t T, int64_t V) {
  at::Tensor start = at::randint(0, V, {B, 1}, at::kLong);
  at::Tensor seq = (start + at::arange(T + 1, at::kLong)).remainder(V);  // (B, T+1)
  return Batch{seq.slice(1, 0, T), seq.slice(1, 1, T + 1)};
}

std::vector<double> train(const std::string& precision, int steps) {
  at::manual_seed(5);
  auto model = std::make_shared<Gpt>(tiny());
  OptimConfig oc;
  oc.lr = 3e-3;
  StrategyConfig sc;
  sc.precision = precision;
  sc.accumulation = 2;
  Engine engine(EngineOptions{sc, 1.0});
  engine.setup(model, make_optimizer(oc, *model));
  at::manual_seed(6);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    StepStats st = engine.step(counting_batch(8, 16, 32), [&](const Batch& mb) {
      return model->loss_sum(model->forward(mb.x), mb.y);
    });
    CHECK(!st.skipped);
    losses.push_back(st.loss);
  }
  return losses;
}

}  // namespace

TEST_CASE("bf16-mixed and fp16-mixed end within tolerance of fp32", "[integration][precision]") {
  const int steps = 40;
  auto fp32 = train("fp32", steps);
  auto bf16 = train("bf16-mixed", steps);
  auto fp16 = train("fp16-mixed", steps);
  // The loss falls well below its start in every precision...
  CHECK(fp32.back() < 0.5 * fp32.front());
  // ...and the low-precision runs track fp32: mean loss over the last 10 steps within 10%
  // (bf16 keeps 8 mantissa bits, so a few percent of drift is expected) and 5% (fp16, 11 bits).
  auto tail_mean = [](const std::vector<double>& v) {
    double s = 0;
    for (size_t i = v.size() - 10; i < v.size(); ++i) s += v[i];
    return s / 10;
  };
  INFO("fp32 " << tail_mean(fp32) << " bf16 " << tail_mean(bf16) << " fp16 " << tail_mean(fp16));
  CHECK(std::abs(tail_mean(bf16) - tail_mean(fp32)) <= 0.10 * tail_mean(fp32));
  CHECK(std::abs(tail_mean(fp16) - tail_mean(fp32)) <= 0.05 * tail_mean(fp32));
  // First step: same weights, only the forward's precision differs.
  CHECK(bf16.front() == Approx(fp32.front()).epsilon(0.01));
  CHECK(fp16.front() == Approx(fp32.front()).epsilon(0.005));
}

TEST_CASE("fp16-mixed skips an overflowing step and backs the scale off", "[integration][precision]") {
  at::manual_seed(7);
  auto model = std::make_shared<Gpt>(tiny());
  StrategyConfig sc;
  sc.precision = "fp16-mixed";
  sc.grad_scaler.init_scale = 1024;
  sc.grad_scaler.growth_interval = 2;
  Engine engine(EngineOptions{sc, 0.0});
  engine.setup(model, make_optimizer(OptimConfig{}, *model));
  std::vector<double> scales;
  std::vector<bool> skipped;
  for (int i = 0; i < 6; ++i) {
    Batch b = counting_batch(4, 16, 32);
    auto before = model->tok_emb->weight.clone();
    StepStats st = engine.step(b, [&](const Batch& mb) {
      at::Tensor loss = model->loss_sum(model->forward(mb.x), mb.y);
      return i == 3 ? loss * std::numeric_limits<float>::infinity() : loss;
    });
    scales.push_back(st.loss_scale);
    skipped.push_back(st.skipped);
    CHECK(at::equal(before, model->tok_emb->weight) == st.skipped);
  }
  CHECK(skipped == std::vector<bool>{false, false, false, true, false, false});
  // Grows x2 after every 2 clean steps, halves on the overflow.
  CHECK(scales == std::vector<double>{1024, 2048, 2048, 1024, 1024, 2048});
  CHECK(engine.precision().state().size() == 2);
}
