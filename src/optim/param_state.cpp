#include "frugal/optim/param_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "frugal/util/error.h"

namespace frugal {
namespace {

template <typename AdamState>
std::map<std::string, at::Tensor> adam_tensors(const AdamState& s) {
  std::map<std::string, at::Tensor> out = {{"exp_avg", s.exp_avg()},
                                           {"exp_avg_sq", s.exp_avg_sq()},
                                           {"step", at::scalar_tensor(s.step(), at::kLong)}};
  if (s.max_exp_avg_sq().defined()) out["max_exp_avg_sq"] = s.max_exp_avg_sq();
  return out;
}

template <typename AdamState>
std::unique_ptr<AdamState> adam_state(const at::Tensor& param,
                                      const std::map<std::string, at::Tensor>& kinds) {
  auto like = [&](const std::string& kind) {
    return kinds.at(kind).to(param.options().requires_grad(false), false, /*copy=*/true);
  };
  auto s = std::make_unique<AdamState>();
  s->step(kinds.at("step").item<int64_t>());
  s->exp_avg(like("exp_avg"));
  s->exp_avg_sq(like("exp_avg_sq"));
  if (kinds.count("max_exp_avg_sq") != 0) s->max_exp_avg_sq(like("max_exp_avg_sq"));
  return s;
}

}  // namespace

std::map<std::string, at::Tensor> param_state_tensors(torch::optim::Optimizer& optimizer,
                                                      const at::Tensor& param) {
  auto& states = optimizer.state();
  auto it = states.find(param.unsafeGetTensorImpl());
  if (it == states.end()) return {};
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) return adam_tensors(*s);
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) return adam_tensors(*s);
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
    return {{"momentum_buffer", s->momentum_buffer()}};
  }
  throw Error("sharded checkpoints: unsupported optimizer state (Adam, AdamW and SGD are)");
}

void set_param_state(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                     const std::map<std::string, at::Tensor>& kinds) {
  std::unique_ptr<torch::optim::OptimizerParamState> state;
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
    state = adam_state<torch::optim::AdamWParamState>(param, kinds);
  } else if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) {
    state = adam_state<torch::optim::AdamParamState>(param, kinds);
  } else if (dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr) {
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(kinds.at("momentum_buffer").to(param.options().requires_grad(false), false, true));
    state = std::move(s);
  } else {
    throw Error("sharded checkpoints: unsupported optimizer (Adam, AdamW and SGD are)");
  }
  optimizer.state()[param.unsafeGetTensorImpl()] = std::move(state);
}

}  // namespace frugal
