// Gradient norm and clipping by global norm, written out (rather than
// torch::nn::utils::clip_grad_norm_) so that a sharded run can sum squared norms across ranks
// before taking the root: same formula as torch.nn.utils.clip_grad_norm_
// (coef = max_norm / (norm + 1e-6), applied only when < 1).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace frugal {

// Sum of squares of all defined gradients, as a 0-dim float64 tensor (to be all-reduced by
// sharded runs before the square root). fp32 gradients on the CPU: frugal's own one-pass
// kernel, squares summed in fp64 (bench/cpu_adam: the clipping phase).
at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params);
// min(1, max_norm / (total_norm + 1e-6)): what clipping multiplies every gradient by.
double clip_coefficient(double total_norm, double max_norm);
// Scales every gradient by clip_coefficient(total_norm, max_norm).
void clip_grads(const std::vector<at::Tensor>& params, double total_norm, double max_norm);

}  // namespace frugal
