#include "frugal/optim/adamw8bit.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>

#include "frugal/optim/quant8.h"
#include "frugal/util/error.h"

namespace frugal {

AdamW8bit::AdamW8bit(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                     AdamW8bitOptions defaults)
    : torch::optim::Optimizer(groups, std::make_unique<AdamW8bitOptions>(defaults)) {
  if (defaults.block() < 1) {
    throw Error("optim.quant_block: must be >= 1, got " + std::to_string(defaults.block()));
  }
}

at::Tensor AdamW8bit::step(LossClosure closure) {
  at::Tensor loss = evaluate_closure(closure);
  torch::NoGradGuard no_grad;
  const double factor = gradient_factor();
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const AdamW8bitOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const int64_t block = o.block();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto s = std::make_unique<AdamW8bitParamState>();
        quant8::Quantized m0 = quant8::zeros(p.numel(), true, block, p.options());
        quant8::Quantized v0 = quant8::zeros(p.numel(), false, block, p.options());
        s->exp_avg_code(m0.codes);
        s->exp_avg_absmax(m0.absmax);
        s->exp_avg_sq_code(v0.codes);
        s->exp_avg_sq_absmax(v0.absmax);
        slot = std::move(s);
      }
      auto& s = static_cast<AdamW8bitParamState&>(*slot);
      s.step(s.step() + 1);
      const auto t = static_cast<double>(s.step());

      at::Tensor g = p.grad().reshape({-1}).to(at::kFloat);
      if (factor != 1.0) g = g * factor;
      at::Tensor m = quant8::dequantize(s.exp_avg_code(), s.exp_avg_absmax(), true, block);
      at::Tensor v = quant8::dequantize(s.exp_avg_sq_code(), s.exp_avg_sq_absmax(), false, block);
      // fp32 parameters are updated in place through a flat view; others through an fp32 copy.
      const bool in_place = p.scalar_type() == at::kFloat && p.is_contiguous();
      at::Tensor w = in_place ? p.view({-1}) : p.reshape({-1}).to(at::kFloat);

      w.mul_(1.0 - o.lr() * o.weight_decay());
      m.mul_(beta1).add_(g, 1.0 - beta1);
      v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      const double bias1 = 1.0 - std::pow(beta1, t);
      const double bias2_sqrt = std::sqrt(1.0 - std::pow(beta2, t));
      at::Tensor denom = (v.sqrt() / bias2_sqrt).add_(o.eps());
      w.addcdiv_(m, denom, -o.lr() / bias1);
      if (!in_place) p.copy_(w.view(p.sizes()));

      at::Tensor m_code = s.exp_avg_code(), m_max = s.exp_avg_absmax();
      at::Tensor v_code = s.exp_avg_sq_code(), v_max = s.exp_avg_sq_absmax();
      quant8::quantize_into(m, true, block, /*never_flush=*/false, m_code, m_max);
      quant8::quantize_into(v, false, block, /*never_flush=*/true, v_code, v_max);
    }
  }
  return loss;
}

}  // namespace frugal
