// Dynamic loss scaling for fp16 training, with exactly the behaviour of torch.amp.GradScaler
// (torch/amp/grad_scaler.py), which LibTorch does not provide:
//   scale(loss)   multiplies the loss by the current scale before backward
//   unscale(p)    divides the gradients by the scale in place, once per step, and records
//                 whether any is inf/NaN (ATen's _amp_foreach_non_finite_check_and_unscale_)
//   step(opt, p)  unscales if not done yet; steps the optimizer only when all are finite
//   update()      backs the scale off on overflow, grows it after growth_interval clean
//                 steps (ATen's _amp_update_scale_)
// Its state (scale, growth tracker) belongs in checkpoints.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <vector>

#include "frugal/config/config.h"
#include "frugal/io/checkpoint.h"

namespace frugal {

// The options are strategy.grad_scaler's struct itself (one definition for the YAML and the
// C++ user); disabled (enabled = false), every call is a pass-through (scale 1, always steps).
using GradScalerOptions = GradScalerConfig;

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  at::Tensor scale(const at::Tensor& loss);
  // Returns true when some gradient is inf or NaN. A second call in the same step is an error
  // (as in PyTorch): unscaling twice would divide twice.
  bool unscale(const std::vector<at::Tensor>& params);
  // After unscale: replaces this step's verdict (ranks holding different shards agree).
  void set_found_inf(bool found_inf);
  // Returns whether the optimizer stepped.
  bool step(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params);
  void update();

  double get_scale() const;
  int64_t growth_tracker() const;
  bool enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  NamedTensors state() const;  // "grad_scaler.scale", "grad_scaler.growth_tracker"
  void load_state(const NamedTensors& state);

 private:
  void lazy_init(const at::Device& device);

  GradScalerOptions options_;
  at::Tensor scale_;           // (1) float32, on the gradients' device
  at::Tensor growth_tracker_;  // (1) int32
  at::Tensor found_inf_;       // (1) float32, this step's verdict
  bool unscaled_ = false;
};

}  // namespace frugal
