#include "frugal/strategy/gradient_hooks.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace frugal {

GradientHooks::GradientHooks(const std::vector<at::Tensor>& params,
                             std::function<void(size_t)> on_accumulated) {
  auto callback = std::make_shared<std::function<void(size_t)>>(std::move(on_accumulated));
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [callback, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
          (*callback)(i);
          return outputs;
        }));
    accumulators_.push_back(std::move(acc));
  }
}

}  // namespace frugal
