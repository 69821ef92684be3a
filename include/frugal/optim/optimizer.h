// Optimizers from config: SGD (momentum, nesterov, weight decay; torch::optim::SGD), Adam and
// AdamW (FusedAdam / FusedAdamW: torch::optim's types, ATen's fused kernels), AdamW with
// 8-bit moments (AdamW8bit, optim/adamw8bit.h) and Adafactor (optim/adafactor.h). Weight decay applies to matrices and embeddings (dim >= 2) only, never to
// biases or LayerNorm gains: two parameter groups, in that order (decay, no_decay).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>

#include "frugal/config/config.h"

namespace frugal {

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const torch::nn::Module& model);
// Same, over an explicit parameter list (one group, decay applied to every parameter of
// dim >= 2 as above).
std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const std::vector<at::Tensor>& params);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace frugal
