#include "frugal/optim/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "frugal/optim/adafactor.h"
#include "frugal/optim/adamw8bit.h"
#include "frugal/optim/fused_adam.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

std::unique_ptr<torch::optim::OptimizerOptions> options_for(const OptimConfig& c,
                                                            double weight_decay) {
  if (c.type == "adamw") {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(c.lr)
                                                            .betas({c.betas[0], c.betas[1]})
                                                            .eps(c.eps)
                                                            .weight_decay(weight_decay));
  }
  if (c.type == "adam") {
    return std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(c.lr)
                                                           .betas({c.betas[0], c.betas[1]})
                                                           .eps(c.eps)
                                                           .weight_decay(weight_decay));
  }
  if (c.type == "sgd") {
    return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(c.lr)
                                                          .momentum(c.momentum)
                                                          .nesterov(c.nesterov)
                                                          .weight_decay(weight_decay));
  }
  if (c.type == "adamw8bit") {
    return std::make_unique<AdamW8bitOptions>(AdamW8bitOptions(c.lr)
                                                  .betas({c.betas[0], c.betas[1]})
                                                  .eps(c.eps)
                                                  .weight_decay(weight_decay)
                                                  .block(c.quant_block));
  }
  if (c.type == "adafactor") {
    return std::make_unique<AdafactorOptions>(
        AdafactorOptions(c.lr).weight_decay(weight_decay).scale_parameter(c.scale_parameter).beta1(
            c.beta1));
  }
  throw Error("optim.type: unknown optimizer '" + c.type +
              "' (expected adamw, adam, sgd, adamw8bit or adafactor)");
}

std::shared_ptr<torch::optim::Optimizer> build(const OptimConfig& c,
                                               std::vector<torch::optim::OptimizerParamGroup> groups) {
  auto defaults = options_for(c, c.weight_decay);
  if (c.type == "adamw") {
    return std::make_shared<FusedAdamW>(std::move(groups),
                                        static_cast<torch::optim::AdamWOptions&>(*defaults));
  }
  if (c.type == "adam") {
    return std::make_shared<FusedAdam>(std::move(groups),
                                       static_cast<torch::optim::AdamOptions&>(*defaults));
  }
  if (c.type == "adamw8bit") {
    return std::make_shared<AdamW8bit>(std::move(groups),
                                       static_cast<AdamW8bitOptions&>(*defaults));
  }
  if (c.type == "adafactor") {
    return std::make_shared<Adafactor>(std::move(groups),
                                       static_cast<AdafactorOptions&>(*defaults));
  }
  return std::make_shared<torch::optim::SGD>(std::move(groups),
                                             static_cast<torch::optim::SGDOptions&>(*defaults));
}

}  // namespace

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& p : params) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  if (decay.empty() && no_decay.empty()) {
    throw Error("optim: nothing left to train: every parameter of the model is frozen (model.freeze, "
                "model.lora)");
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options_for(cfg, cfg.weight_decay));
  groups.emplace_back(no_decay, options_for(cfg, 0.0));
  return build(cfg, std::move(groups));
}

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const torch::nn::Module& model) {
  return make_optimizer(cfg, model.parameters());
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace frugal
