// AdamW with 8-bit blockwise-quantized moments (Dettmers et al. 2022): per parameter, m and v
// as one uint8 code per value plus one fp32 absmax per block (optim/quant8.h; signed map for
// m, unsigned for v), 2 bytes per value + 8 per block instead of AdamW's 8 bytes per value.
// Each step, per parameter: dequantize m and v, the AdamW update in fp32 exactly as
// torch::optim::AdamW writes it (decoupled decay p *= 1 - lr wd; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)), the
// update computed from the fp32 m and v, then both requantized to the nearest codes for the
// next step. ATen ops only: CPU and CUDA alike. Parameters fp32 or lower (computed in fp32,
// rounded once on the way out).
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <tuple>

#include "frugal/optim/fused_adam.h"

namespace frugal {

struct AdamW8bitOptions : public torch::optim::OptimizerCloneableOptions<AdamW8bitOptions> {
  AdamW8bitOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  using betas_t = std::tuple<double, double>;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0.0;
  // Values per quantization block (its absmax is shared by that many codes).
  TORCH_ARG(int64_t, block) = 256;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct AdamW8bitParamState
    : public torch::optim::OptimizerCloneableParamState<AdamW8bitParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(at::Tensor, exp_avg_code);       // uint8, numel
  TORCH_ARG(at::Tensor, exp_avg_absmax);     // fp32, one per block
  TORCH_ARG(at::Tensor, exp_avg_sq_code);    // uint8, numel
  TORCH_ARG(at::Tensor, exp_avg_sq_absmax);  // fp32, one per block
};

class AdamW8bit : public torch::optim::Optimizer, public GradientFactorInStep {
 public:
  explicit AdamW8bit(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                     AdamW8bitOptions defaults = {});
  explicit AdamW8bit(std::vector<at::Tensor> params, AdamW8bitOptions defaults = {})
      : AdamW8bit({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace frugal
