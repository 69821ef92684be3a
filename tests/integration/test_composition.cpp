// Every combination of precision x activation checkpointing x accumulation trains a tiny GPT
// for a few steps and is checked against its reference:
//   - checkpointing is exact: same precision and accumulation, with dropout on, parameters are
//     bit-identical to no checkpointing;
//   - accumulation only changes summation order: losses match one big batch within 1e-5
//     relative (fp32) or 2e-2 (bf16/fp16: the forward's rounding depends on batch shapes);
//   - mixed precision tracks fp32: per-step losses within 3% (bf16) and 1% (fp16).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "frugal/engine/engine.h"
#include "frugal/models/gpt.h"
#include "frugal/optim/optimizer.h"

using namespace frugal;

namespace {

struct Run {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
};

Run train(const std::string& precision, const std::string& policy, int64_t accumulation,
          double dropout) {
  at::manual_seed(11);
  auto model = std::make_shared<Gpt>(GptOptions::sized(48, 16, 4, 2, 32, dropout));
  StrategyConfig sc;
  sc.precision = precision;
  sc.accumulation = accumulation;
  sc.checkpointing.policy = policy;
  sc.checkpointing.k = 2;
  sc.checkpointing.targets = {"attn"};
  Engine engine(EngineOptions{sc, 1.0});
  OptimConfig oc;
  oc.lr = 2e-3;
  engine.setup(model, make_optimizer(oc, *model));
  at::manual_seed(12);
  Run r;
  for (int step = 0; step < 4; ++step) {
    at::Tensor start = at::randint(0, 48, {8, 1}, at::kLong);
    at::Tensor seq = (start * 7 + at::arange(17, at::kLong) * 3).remainder(48);  // (8, 17)
    Batch b{seq.slice(1, 0, 16), seq.slice(1, 1, 17)};
    StepStats st = engine.step(b, [&](const Batch& mb) {
      return model->loss_sum(model->forward(mb.x), mb.y);
    });
    REQUIRE(!st.skipped);
    r.losses.push_back(st.loss);
  }
  for (const auto& p : model->parameters()) r.params.push_back(p.detach().clone());
  return r;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

}  // namespace

TEST_CASE("precision x checkpointing x accumulation: every combination trains correctly",
          "[integration][composition]") {
  const std::vector<std::string> precisions = {"fp32", "bf16-mixed", "fp16-mixed"};
  const std::vector<std::string> policies = {"none", "full", "every_k", "selective"};
  Run fp32_reference = train("fp32", "none", 1, 0.0);
  for (const auto& p : precisions) {
    Run plain = train(p, "none", 1, 0.0);
    for (int64_t k : {1, 2}) {
      Run with_dropout = train(p, "none", k, 0.1);
      for (const auto& policy : policies) {
        INFO(fmt::format("precision {} checkpointing {} accumulation {}", p, policy, k));
        // Checkpointing is exact, RNG included.
        Run ck = train(p, policy, k, 0.1);
        CHECK(ck.losses == with_dropout.losses);
        for (size_t i = 0; i < ck.params.size(); ++i) {
          CHECK(at::equal(ck.params[i], with_dropout.params[i]));
        }
        // Accumulation: one large batch's losses, up to summation order / rounding.
        Run acc = train(p, policy, k, 0.0);
        CHECK(max_rel(acc.losses, plain.losses) <= (p == "fp32" ? 1e-5 : 2e-2));
        // Precision: tracks fp32.
        const double tol = p == "fp32" ? 1e-5 : (p == "bf16-mixed" ? 3e-2 : 1e-2);
        CHECK(max_rel(acc.losses, fp32_reference.losses) <= tol);
      }
    }
  }
}
