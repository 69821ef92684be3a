// frugal's fused CPU Adam / AdamW step: one pass over parameter, gradient and the two moments
// per element (read 16 bytes, write 12 for fp32), vectorized with ATen's at::vec and split
// over threads with at::parallel_for. Moments are fp32; parameters and gradients fp32 or
// bf16 (computed in fp32, rounded once on the way out). The arithmetic is torch.optim's:
//   g *= grad_factor (1 unless clipping is folded in)
//   AdamW: p *= 1 - lr * wd          Adam: g += wd * p
//   m += (1 - b1) (g - m)            v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The host half of optimizer offload (strategy.offload) and bench/cpu_adam use it.
#pragma once

#include <ATen/core/Tensor.h>

namespace frugal {

struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = true;  // AdamW (decay applied to the parameter) or Adam (to the gradient)
  // Every gradient is read as grad * grad_factor (the gradient tensor is left as it is):
  // gradient clipping folded into the step, one pass over the gradients fewer than clipping
  // them first. For fp32 gradients the result is bit-identical to scaling them beforehand.
  double grad_factor = 1.0;
};

// One step (`step` = this step's count, from 1) of every element; all four tensors on the
// CPU, contiguous, with the same number of elements.
void cpu_adam_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg,
                   at::Tensor& exp_avg_sq, const AdamHyper& h, int64_t step);

}  // namespace frugal
