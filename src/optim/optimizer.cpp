#include "frugal/optim/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "frugal/config/named_registry.h"
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
  // A registered optimizer builds its own options; the built-in ones never get here.
  throw Error("optim.type: '" + c.type + "' has no built-in options");
}

// One group per weight decay (decay, no_decay), each with its own options of the optimizer's
// type.
template <class Opt, class Options>
std::shared_ptr<torch::optim::Optimizer> over_groups(const OptimConfig& c,
                                                     const OptimizerGroups& params) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(params.decay, options_for(c, c.weight_decay));
  groups.emplace_back(params.no_decay, options_for(c, 0.0));
  auto defaults = options_for(c, c.weight_decay);
  return std::make_shared<Opt>(std::move(groups), static_cast<Options&>(*defaults));
}

NamedRegistry<OptimizerFactory>& optimizers() {
  static NamedRegistry<OptimizerFactory> r(
      "optim.type", "optimizer",
      {
          {"adamw", over_groups<FusedAdamW, torch::optim::AdamWOptions>},
          {"adam", over_groups<FusedAdam, torch::optim::AdamOptions>},
          {"sgd", over_groups<torch::optim::SGD, torch::optim::SGDOptions>},
          {"adamw8bit", over_groups<AdamW8bit, AdamW8bitOptions>},
          {"adafactor", over_groups<Adafactor, AdafactorOptions>},
      },
      /*validated=*/true);
  return r;
}

// Built when the library loads, so that config validation knows the built-in names.
[[maybe_unused]] const bool kOptimizerNamesAtLoad = (optimizers(), true);

}  // namespace

void register_optimizer(const std::string& name, OptimizerFactory factory) {
  if (!factory) throw std::invalid_argument("register_optimizer: empty factory");
  optimizers().add(name, std::move(factory));
}

std::vector<std::string> optimizer_names() { return optimizers().names(); }

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
  return optimizers().get(cfg.type)(cfg, {std::move(decay), std::move(no_decay)});
}

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimConfig& cfg,
                                                        const torch::nn::Module& model) {
  return make_optimizer(cfg, model.parameters());
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace frugal
