// The model contract the engine and trainer rely on. Any torch::nn::Module can be trained
// through the Engine with a user loss function; frugal's built-in models derive from Model so
// the trainer can also compute their loss and find their blocks.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace frugal {

class Model : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  // inputs -> outputs (logits)
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // Sum (not mean) of the per-target losses of one micro-batch: the engine divides by the
  // target count of the whole step, so accumulation and sharding never change the loss.
  // Default: cross entropy over the last dimension of `output`.
  virtual at::Tensor loss_sum(const at::Tensor& output, const at::Tensor& targets) const;
  // Names of the child module lists whose elements are the model's blocks (units for
  // activation checkpointing and sharding), e.g. {"blocks"}.
  virtual std::vector<std::string> block_lists() const { return {}; }
};

// Cross entropy summed over all targets: output (..., C) logits, targets (...) class indices.
at::Tensor cross_entropy_sum(const at::Tensor& output, const at::Tensor& targets);

}  // namespace frugal
