// Optimizers from config: SGD (momentum, nesterov, weight decay; torch::optim::SGD), Adam and
// AdamW (FusedAdam / FusedAdamW: torch::optim's types, ATen's fused kernels), AdamW with
// 8-bit moments (AdamW8bit, optim/adamw8bit.h) and Adafactor (optim/adafactor.h). Weight decay applies to matrices and embeddings (dim >= 2) only, never to
// biases or LayerNorm gains: two parameter groups, in that order (decay, no_decay).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

// The trained parameters, by weight decay: matrices and embeddings, the rest.
struct OptimizerGroups {
  std::vector<at::Tensor> decay, no_decay;
};
// Builds an optimizer over the two groups (in that order; no_decay with weight decay 0) from
// optim.*; the trainer's learning rate schedule sets each group's lr before every step.
using OptimizerFactory = std::function<std::shared_ptr<torch::optim::Optimizer>(
    const OptimConfig& cfg, const OptimizerGroups& groups)>;
// Makes `name` a valid optim.type (in YAML and for make_optimizer); a name already taken
// (built in or registered) is a frugal::Error. Built in: adamw, adam, sgd, adamw8bit, adafactor.
void register_optimizer(const std::string& name, OptimizerFactory factory);
std::vector<std::string> optimizer_names();

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const torch::nn::Module& model);
// Same, over an explicit parameter list (one group, decay applied to every parameter of
// dim >= 2 as above).
std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const std::vector<at::Tensor>& params);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace frugal
