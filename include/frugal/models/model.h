// The model contract the engine and trainer rely on. Any torch::nn::Module can be trained
// through the Engine with a user loss function; frugal's built-in models derive from Model so
// the trainer can also compute their loss and find their blocks.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

namespace frugal {

struct Batch;

class Model : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  // inputs -> outputs (logits)
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The outputs of a whole batch: models that honour an attention mask or position ids
  // (Llama) override it; the default is forward(batch.x) and refuses a batch that carries
  // them rather than ignore them.
  virtual at::Tensor forward_batch(const Batch& batch);
  // Sum (not mean) of the per-target losses of one micro-batch: the engine divides by the
  // target count of the whole step, so accumulation and sharding never change the loss.
  // Default: cross entropy over the last dimension of `output`.
  virtual at::Tensor loss_sum(const at::Tensor& output, const at::Tensor& targets) const;
  // The summed loss of a batch: loss_sum(forward_batch(batch), batch.y) by default; the
  // language models compute it without whole logits when model.loss_chunk_tokens is set
  // (models/chunked_loss.h). What the trainer and the evaluator call.
  virtual at::Tensor batch_loss_sum(const Batch& batch);
  // Training FLOPs (forward and backward) per token at sequence length `seq_len`, for the
  // utilisation figures; 0 = unknown (the default).
  virtual double flops_per_token(int64_t seq_len) const { (void)seq_len; return 0.0; }
  // Names of the child module lists whose elements are the model's blocks (units for
  // activation checkpointing and sharding), e.g. {"blocks"}.
  virtual std::vector<std::string> block_lists() const { return {}; }
};

// Cross entropy summed over all targets: output (..., C) logits, targets (...) class indices.
at::Tensor cross_entropy_sum(const at::Tensor& output, const at::Tensor& targets);

// y = x W^T + b through ATen's at::linear. Prefer it to torch::nn::Linear::forward, whose C++
// frontend version runs matmul and then an in-place `+= bias` for inputs of 3 or more
// dimensions: at::linear folds them into one addmm, and under autocast the in-place add of an
// fp32 bias into a bf16 output (a type-promoting pass over the whole activation) disappears.
// Measured on the strategies benchmark's GPT, bf16: that add was ~20% of a checkpointed step.
at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x);

}  // namespace frugal
