#include "frugal/optim/adafactor.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>

namespace frugal {
namespace {

// Root mean square as a 0-dim tensor: no host synchronisation on a device.
at::Tensor adafactor_rms(const at::Tensor& x) {
  return x.norm(2) / std::sqrt(static_cast<double>(x.numel()));
}

}  // namespace

at::Tensor Adafactor::step(LossClosure closure) {
  at::Tensor loss = evaluate_closure(closure);
  torch::NoGradGuard no_grad;
  const double factor = gradient_factor();
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const AdafactorOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const bool factored = p.dim() >= 2;
      const auto floats = p.options().dtype(at::kFloat).requires_grad(false);
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto s = std::make_unique<AdafactorParamState>();
        if (factored) {
          std::vector<int64_t> row = p.sizes().vec(), col = p.sizes().vec();
          row.pop_back();
          col.erase(col.end() - 2);
          s->exp_avg_sq_row(at::zeros(row, floats));
          s->exp_avg_sq_col(at::zeros(col, floats));
        } else {
          s->exp_avg_sq(at::zeros(p.sizes(), floats));
        }
        slot = std::move(s);
      }
      auto& s = static_cast<AdafactorParamState&>(*slot);
      s.step(s.step() + 1);
      const double beta2 = 1.0 - std::pow(static_cast<double>(s.step()), o.decay_rate());

      at::Tensor g = p.grad().to(at::kFloat);
      if (factor != 1.0) g = g * factor;
      const bool in_place = p.scalar_type() == at::kFloat;
      at::Tensor w = in_place ? p : p.to(at::kFloat);
      // The step size, from the parameter before this step.
      at::Tensor alpha = at::scalar_tensor(o.lr(), floats);
      if (o.scale_parameter()) alpha = adafactor_rms(w).clamp_min(o.eps2()) * o.lr();

      at::Tensor g2 = g * g + o.eps1();
      at::Tensor update;
      if (factored) {
        at::Tensor row = s.exp_avg_sq_row(), col = s.exp_avg_sq_col();
        row.mul_(beta2).add_(g2.mean(-1), 1.0 - beta2);
        col.mul_(beta2).add_(g2.mean(-2), 1.0 - beta2);
        at::Tensor row_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
        at::Tensor col_factor = col.unsqueeze(-2).rsqrt();
        update = row_factor * col_factor * g;
      } else {
        at::Tensor v = s.exp_avg_sq();
        v.mul_(beta2).add_(g2, 1.0 - beta2);
        update = v.rsqrt() * g;
      }
      update.div_((adafactor_rms(update) / o.clip_threshold()).clamp_min_(1.0));
      update.mul_(alpha);
      if (o.beta1() > 0.0) {
        // Made at the first step that needs it (the state above covers the second moment).
        if (!s.exp_avg().defined()) s.exp_avg(at::zeros(p.sizes(), floats));
        update = s.exp_avg().mul_(o.beta1()).add_(update, 1.0 - o.beta1());
      }
      if (o.weight_decay() != 0.0) w.sub_(w * (alpha * o.weight_decay()));
      w.sub_(update);
      if (!in_place) p.copy_(w);
    }
  }
  return loss;
}

}  // namespace frugal
