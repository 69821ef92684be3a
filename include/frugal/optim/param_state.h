// One parameter's optimizer state as tensors by kind, and back: Adam / AdamW keep exp_avg,
// exp_avg_sq, max_exp_avg_sq (amsgrad) and step; SGD keeps momentum_buffer. Sharded
// checkpoints store state this way, so that it can be resharded element by element.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>

namespace frugal {

// Empty when the parameter has no state yet (before the first step). `step` is a 0-dim int64.
std::map<std::string, at::Tensor> param_state_tensors(torch::optim::Optimizer& optimizer,
                                                      const at::Tensor& param);
// Replaces the parameter's state; tensors are copied to the parameter's device and dtype
// (step stays an integer). An optimizer other than Adam, AdamW and SGD is a frugal::Error.
void set_param_state(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                     const std::map<std::string, at::Tensor>& kinds);

}  // namespace frugal
