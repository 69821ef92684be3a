// Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory
// Cost"), with the learning rate given (no relative step size) and an optional first moment:
// for a parameter X of dim >= 2, the second moment of its last two dims is kept factored as
// running averages of row and column means of G^2 + eps1 (O(rows + cols) floats per matrix);
// vectors keep a full second moment. Each step t (from 1):
//   b2 = 1 - t^decay_rate                        (decay_rate -0.8: 0 at t = 1)
//   R = b2 R + (1 - b2) mean_cols(G^2 + eps1);   C = b2 C + (1 - b2) mean_rows(G^2 + eps1)
//   V = R C / mean(R)                             (the paper's R C / 1^T R, with means)
//   U = G / sqrt(V);  U /= max(1, RMS(U) / clip_threshold)
//   a = lr * max(eps2, RMS(X))   (scale_parameter; lr alone without)
//   with beta1 > 0:  M = beta1 M + (1 - beta1) a U   (a full fp32 tensor per parameter)
//   X -= a * weight_decay * X;  X -= a * U   (or M)
// transformers.optimization.Adafactor(relative_step=False, warmup_init=False, beta1=beta1 or
// None) computes the same. ATen ops only (CPU and CUDA); computed in fp32 for any parameter dtype.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>

#include "frugal/optim/fused_adam.h"

namespace frugal {

struct AdafactorOptions : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  AdafactorOptions(double lr = 1e-2) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-2;
  TORCH_ARG(double, eps1) = 1e-30;  // added to G^2
  TORCH_ARG(double, eps2) = 1e-3;   // floor of the parameter scale RMS(X)
  TORCH_ARG(double, clip_threshold) = 1.0;
  TORCH_ARG(double, decay_rate) = -0.8;
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(bool, scale_parameter) = true;
  // The first moment's decay; 0: none (only the factored second moment is kept).
  TORCH_ARG(double, beta1) = 0.0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct AdafactorParamState
    : public torch::optim::OptimizerCloneableParamState<AdafactorParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg_sq_row);  // dim >= 2: sizes[:-1]
  TORCH_ARG(at::Tensor, exp_avg_sq_col);  // dim >= 2: sizes[:-2] + sizes[-1:]
  TORCH_ARG(at::Tensor, exp_avg_sq);      // dim < 2: the parameter's shape
  TORCH_ARG(at::Tensor, exp_avg);         // beta1 > 0: the parameter's shape
};

class Adafactor : public torch::optim::Optimizer, public GradientFactorInStep {
 public:
  explicit Adafactor(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                     AdafactorOptions defaults = {})
      : torch::optim::Optimizer(groups, std::make_unique<AdafactorOptions>(defaults)) {}
  explicit Adafactor(std::vector<at::Tensor> params, AdafactorOptions defaults = {})
      : Adafactor({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace frugal
