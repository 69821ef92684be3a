// Clipping's two CPU fast paths: the global norm's own sum-of-squares kernel (fp64 sums,
// independent of the thread count), and the clip coefficient folded into frugal's fused
// Adam / AdamW (the optimizer multiplies each gradient inside its update), which must give
// exactly what clipping the gradients first and then stepping gives, and leave the
// gradients themselves untouched.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include "frugal/engine/engine.h"
#include "frugal/models/mlp.h"
#include "frugal/optim/clip.h"
#include "frugal/optim/cpu_adam.h"
#include "frugal/optim/fused_adam.h"

using namespace frugal;

namespace {

// Sizes with tails that no vector width divides, and one below a single vector.
std::vector<at::Tensor> make_params() {
  at::manual_seed(21);
  std::vector<at::Tensor> out;
  for (int64_t n : {1000, 37, 16 * 64 + 5, 7}) out.push_back(at::randn({n}).requires_grad_(true));
  return out;
}

template <class Optimizer, class Options>
void check_fold_equals_clip_first() {
  auto clipped_first = make_params(), folded = make_params();
  Options options(1e-2);
  options.weight_decay(0.1);
  Optimizer a(clipped_first, options), b(folded, options);
  const double max_norm = 0.5;
  at::manual_seed(22);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < folded.size(); ++i) {
      at::Tensor g = at::randn({folded[i].numel()});
      clipped_first[i].mutable_grad() = g.clone();
      folded[i].mutable_grad() = g.clone();
    }
    const double norm = std::sqrt(grad_norm_squared(folded).template item<double>());
    const double coef = clip_coefficient(norm, max_norm);
    REQUIRE(coef < 0.5);  // clipping is active, by a factor that matters
    clip_grads(clipped_first, norm, max_norm);
    a.step();
    const at::Tensor grad_before = folded[0].grad().clone();
    b.set_gradient_factor(coef);
    b.step();
    CHECK(at::equal(folded[0].grad(), grad_before));  // the gradient tensor is not scaled
  }
  for (size_t i = 0; i < folded.size(); ++i) {
    INFO("parameter " << i << " of " << folded[i].numel() << " elements");
    CHECK(at::equal(folded[i], clipped_first[i]));
    auto& sa = static_cast<typename Optimizer::ParamState&>(*a.state().at(clipped_first[i].unsafeGetTensorImpl()));
    auto& sb = static_cast<typename Optimizer::ParamState&>(*b.state().at(folded[i].unsafeGetTensorImpl()));
    CHECK(at::equal(sa.exp_avg(), sb.exp_avg()));
    CHECK(at::equal(sa.exp_avg_sq(), sb.exp_avg_sq()));
  }
}

struct AdamW : FusedAdamW {
  using FusedAdamW::FusedAdamW;
  using ParamState = torch::optim::AdamWParamState;
};
struct Adam : FusedAdam {
  using FusedAdam::FusedAdam;
  using ParamState = torch::optim::AdamParamState;
};

}  // namespace

TEST_CASE("clipping folded into the fused Adam(W) step equals clipping first, bit for bit",
          "[unit][optim]") {
  SECTION("AdamW, fp32") { check_fold_equals_clip_first<AdamW, torch::optim::AdamWOptions>(); }
  SECTION("Adam, fp32") { check_fold_equals_clip_first<Adam, torch::optim::AdamOptions>(); }
}

TEST_CASE("the CPU Adam kernel's gradient factor equals scaling the gradients first",
          "[unit][optim]") {
  // bf16 parameters (offload's device copies) with fp32 gradients, and all-fp32; sizes with
  // and without a tail.
  for (auto dtype : {at::kBFloat16, at::kFloat}) {
    for (int64_t n : {1029, 7, 64}) {
      INFO(c10::toString(dtype) << ", " << n << " elements");
      at::manual_seed(23);
      at::Tensor p0 = at::randn({n}).to(dtype), g = at::randn({n});
      at::Tensor pa = p0.clone(), ma = at::zeros({n}), va = at::zeros({n});
      at::Tensor pb = p0.clone(), mb = at::zeros({n}), vb = at::zeros({n});
      AdamHyper h;
      h.weight_decay = 0.1;
      for (int step = 1; step <= 3; ++step) {
        cpu_adam_step(pa, g * 0.37, ma, va, h, step);
        h.grad_factor = 0.37;
        cpu_adam_step(pb, g, mb, vb, h, step);
        h.grad_factor = 1.0;
      }
      CHECK(at::equal(pa, pb));
      CHECK(at::equal(ma, mb));
      CHECK(at::equal(va, vb));
    }
  }
}

TEST_CASE("the engine folds clipping into frugal's fused AdamW and scales gradients for others",
          "[unit][optim][engine]") {
  // The same five clipped steps through the engine, with frugal's FusedAdamW (clipping in the
  // step) and with an optimizer the engine cannot fold into (so it scales the gradients
  // first) that runs the same FusedAdamW update: identical weights.
  struct ClipFirst : torch::optim::AdamW {
    ClipFirst(std::shared_ptr<FusedAdamW> fused, std::vector<at::Tensor> params)
        : torch::optim::AdamW(std::move(params)), fused(std::move(fused)) {}
    std::shared_ptr<FusedAdamW> fused;
    at::Tensor step(LossClosure) override { return fused->step(); }
  };
  auto run = [](bool fold) {
    at::manual_seed(4);
    auto model = std::make_shared<Mlp>(6, std::vector<int64_t>{16}, 3);
    auto fused = std::make_shared<FusedAdamW>(model->parameters(),
                                              torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
    std::shared_ptr<torch::optim::Optimizer> optimizer = fused;
    if (!fold) optimizer = std::make_shared<ClipFirst>(fused, model->parameters());
    Engine engine(EngineOptions{StrategyConfig{}, /*clip_grad_norm=*/0.05});
    engine.setup(model, optimizer);
    at::manual_seed(5);
    for (int i = 0; i < 5; ++i) {
      Batch b{at::randn({12, 6}), at::randint(0, 3, {12}, at::kLong)};
      const StepStats s = engine.step(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
      REQUIRE(s.grad_norm > 0.05);  // every step clips
    }
    CHECK(fused->gradient_factor() == 1.0);  // reset after the step
    return model->parameters();
  };
  auto folded = run(true), clipped_first = run(false);
  for (size_t i = 0; i < folded.size(); ++i) CHECK(at::equal(folded[i], clipped_first[i]));
}

TEST_CASE("the CPU gradient norm sums squares in fp64, the same on any number of threads",
          "[unit][optim]") {
  at::manual_seed(24);
  std::vector<at::Tensor> params;
  // Tails, a tensor under one vector, and one over several 64K-element chunks.
  for (int64_t n : {300001, 7, 1029, 65536}) {
    params.push_back(at::zeros({n}, at::requires_grad()));
    params.back().mutable_grad() = at::randn({n}) * 3.0;
  }
  params.push_back(at::zeros({3}, at::requires_grad()));  // no gradient: not counted
  double expected = 0.0;
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    expected += params[i].grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  const int threads = at::get_num_threads();
  const double with_all = grad_norm_squared(params).item<double>();
  at::set_num_threads(1);
  const double with_one = grad_norm_squared(params).item<double>();
  at::set_num_threads(threads);
  CHECK(with_all == with_one);
  CHECK(std::abs(with_all - expected) / expected < 1e-13);
  // Not fp32 on the CPU: ATen's norms, the same value to fp32 rounding.
  std::vector<at::Tensor> as_double;
  for (auto& p : params) {
    as_double.push_back(at::zeros_like(p, at::kDouble).requires_grad_(true));
    if (p.grad().defined()) as_double.back().mutable_grad() = p.grad().to(at::kDouble);
  }
  CHECK(grad_norm_squared(as_double).item<double>() == Approx(expected).epsilon(1e-12));
}
