// Adam and AdamW that update every parameter of a group in one fused pass: on the CPU with
// fp32 moments, frugal's own kernel (optim/cpu_adam.h); elsewhere ATen's fused kernel
// (at::_fused_adam_ / at::_fused_adamw_, the kernels behind torch.optim.Adam(fused=True)):
// one pass over param, grad, m and v per element instead of a dozen tensor ops per
// parameter. They subclass torch::optim::Adam / AdamW and keep their option and state types,
// so checkpoints are interchangeable with the unfused optimizers.
#pragma once

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

namespace frugal {

// torch::optim's closure protocol, which every step() starts with: the loss re-evaluated with
// grad mode on (an undefined tensor without a closure).
inline at::Tensor evaluate_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  at::AutoGradMode grad(true);
  return closure();
}

// An optimizer that multiplies every gradient by a factor inside its own update, so that
// gradient clipping costs no pass of its own over the gradients (the engine folds the clip
// coefficient in; see optim/clip.h). The gradient tensors are left unscaled.
class GradientFactorInStep {
 public:
  virtual ~GradientFactorInStep() = default;
  // Applies to every following step() until changed; 1 = gradients as they are.
  void set_gradient_factor(double factor) { gradient_factor_ = factor; }
  double gradient_factor() const { return gradient_factor_; }

 private:
  double gradient_factor_ = 1.0;
};

class FusedAdamW : public torch::optim::AdamW, public GradientFactorInStep {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdam : public torch::optim::Adam, public GradientFactorInStep {
 public:
  using torch::optim::Adam::Adam;
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace frugal
