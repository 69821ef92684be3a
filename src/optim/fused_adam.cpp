#include "frugal/optim/fused_adam.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <type_traits>

#include "frugal/optim/cpu_adam.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

// One fused call per parameter group. ParamState/Options are the torch::optim types of the
// optimizer (AdamWParamState/AdamWOptions or AdamParamState/AdamOptions).
template <class ParamState, class Options, class Kernel>
void fused_step(torch::optim::Optimizer& opt, double grad_factor, Kernel kernel) {
  torch::NoGradGuard no_grad;
  for (auto& group : opt.param_groups()) {
    auto& o = static_cast<Options&>(group.options());
    if (o.amsgrad()) throw Error("optim: amsgrad is not supported by the fused Adam kernels");
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<int64_t> steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = opt.state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto s = std::make_unique<ParamState>();
        s->step(0);
        s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<ParamState&>(*slot);
      s.step(s.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      steps.push_back(s.step());
    }
    if (params.empty()) continue;
    // On the CPU, frugal's fused kernel (optim/cpu_adam.h): one pass per element, at the
    // memory bandwidth (bench/cpu_adam), for fp32 or bf16 parameters with fp32 moments.
    bool on_cpu = true;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& p = params[i];
      on_cpu = on_cpu && p.device().is_cpu() && p.is_contiguous() && grads[i].is_contiguous() &&
               (p.scalar_type() == at::kFloat || p.scalar_type() == at::kBFloat16) &&
               (grads[i].scalar_type() == at::kFloat || grads[i].scalar_type() == p.scalar_type()) &&
               exp_avgs[i].scalar_type() == at::kFloat && exp_avg_sqs[i].scalar_type() == at::kFloat;
    }
    if (on_cpu) {
      AdamHyper h;
      h.lr = o.lr();
      h.beta1 = std::get<0>(o.betas());
      h.beta2 = std::get<1>(o.betas());
      h.eps = o.eps();
      h.weight_decay = o.weight_decay();
      h.decoupled = std::is_same_v<Options, torch::optim::AdamWOptions>;
      h.grad_factor = grad_factor;
      for (size_t i = 0; i < params.size(); ++i) {
        cpu_adam_step(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], h, steps[i]);
      }
      continue;
    }
    // ATen's kernel has no factor (its grad_scale divides, which rounds differently from
    // the clipping pass it replaces): the gradients are scaled first.
    if (grad_factor != 1.0) at::_foreach_mul_(grads, grad_factor);
    // The kernel reads each parameter's step count from a float tensor, as in PyTorch.
    at::Tensor step_values =
        at::tensor(steps, at::kLong).to(at::TensorOptions().dtype(at::kFloat).device(params[0].device()));
    const auto beta = o.betas();
    const std::vector<at::Tensor> no_max_exp_avg_sqs;  // amsgrad is off
    kernel(params, grads, exp_avgs, exp_avg_sqs, no_max_exp_avg_sqs, step_values.unbind(), o.lr(),
           std::get<0>(beta),
           std::get<1>(beta), o.weight_decay(), o.eps());
  }
}

// The closure protocol of torch::optim (re-evaluate the loss with grad on), then the update.
template <class ParamState, class Options, class Kernel>
at::Tensor closure_then_step(torch::optim::Optimizer& opt, double grad_factor,
                             const torch::optim::Optimizer::LossClosure& closure, Kernel kernel) {
  at::Tensor loss = evaluate_closure(closure);
  fused_step<ParamState, Options>(opt, grad_factor, kernel);
  return loss;
}

}  // namespace

at::Tensor FusedAdamW::step(LossClosure closure) {
  return closure_then_step<torch::optim::AdamWParamState, torch::optim::AdamWOptions>(
      *this, gradient_factor(), closure, [](auto&&... args) {
        at::_fused_adamw_(std::forward<decltype(args)>(args)..., /*amsgrad=*/false,
                          /*maximize=*/false);
      });
}

at::Tensor FusedAdam::step(LossClosure closure) {
  return closure_then_step<torch::optim::AdamParamState, torch::optim::AdamOptions>(
      *this, gradient_factor(), closure, [](auto&&... args) {
        at::_fused_adam_(std::forward<decltype(args)>(args)..., /*amsgrad=*/false,
                         /*maximize=*/false);
      });
}

}  // namespace frugal
