#include "frugal/optim/param_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "frugal/optim/adafactor.h"
#include "frugal/optim/adamw8bit.h"
#include "frugal/optim/quant8.h"
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

// The options of the group holding `param`.
const torch::optim::OptimizerOptions& group_options(torch::optim::Optimizer& optimizer,
                                                    const at::Tensor& param) {
  for (auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl()) return group.options();
    }
  }
  throw Error("optimizer state: the tensor is not a parameter of the optimizer");
}

// A saved kind, on the parameter's device, in its own dtype, with the number of elements
// the optimizer expects.
at::Tensor saved_kind(const std::map<std::string, at::Tensor>& kinds, const std::string& kind,
                      const at::Tensor& param, at::IntArrayRef shape) {
  auto it = kinds.find(kind);
  if (it == kinds.end()) throw Error("optimizer state: no '" + kind + "' for a parameter");
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (it->second.numel() != numel) {
    throw Error("optimizer state: '" + kind + "' has " + std::to_string(it->second.numel()) +
                " elements, the optimizer expects " + std::to_string(numel) +
                " (another optim.quant_block, or another parameter shape?)");
  }
  return it->second.to(param.device(), it->second.scalar_type(), false, /*copy=*/true)
      .reshape(shape)
      .contiguous();
}

std::unique_ptr<AdamW8bitParamState> adamw8bit_state(torch::optim::Optimizer& optimizer,
                                                     const at::Tensor& param,
                                                     const std::map<std::string, at::Tensor>& kinds) {
  const int64_t block = static_cast<const AdamW8bitOptions&>(group_options(optimizer, param)).block();
  const int64_t n = param.numel(), blocks = quant8::block_count(n, block);
  auto s = std::make_unique<AdamW8bitParamState>();
  s->step(kinds.at("step").item<int64_t>());
  s->exp_avg_code(saved_kind(kinds, "exp_avg_code", param, {n}).to(at::kByte));
  s->exp_avg_absmax(saved_kind(kinds, "exp_avg_absmax", param, {blocks}).to(at::kFloat));
  s->exp_avg_sq_code(saved_kind(kinds, "exp_avg_sq_code", param, {n}).to(at::kByte));
  s->exp_avg_sq_absmax(saved_kind(kinds, "exp_avg_sq_absmax", param, {blocks}).to(at::kFloat));
  return s;
}

std::unique_ptr<AdafactorParamState> adafactor_state(const at::Tensor& param,
                                                     const std::map<std::string, at::Tensor>& kinds) {
  auto s = std::make_unique<AdafactorParamState>();
  s->step(kinds.at("step").item<int64_t>());
  if (param.dim() >= 2) {
    std::vector<int64_t> row = param.sizes().vec(), col = param.sizes().vec();
    row.pop_back();
    col.erase(col.end() - 2);
    s->exp_avg_sq_row(saved_kind(kinds, "exp_avg_sq_row", param, row).to(at::kFloat));
    s->exp_avg_sq_col(saved_kind(kinds, "exp_avg_sq_col", param, col).to(at::kFloat));
  } else {
    s->exp_avg_sq(saved_kind(kinds, "exp_avg_sq", param, param.sizes()).to(at::kFloat));
  }
  if (kinds.count("exp_avg") != 0) {
    s->exp_avg(saved_kind(kinds, "exp_avg", param, param.sizes()).to(at::kFloat));
  }
  return s;
}

}  // namespace

bool reshardable_state_kind(const std::string& kind) {
  return kind == "step" || kind == "exp_avg" || kind == "exp_avg_sq" ||
         kind == "max_exp_avg_sq" || kind == "momentum_buffer";
}

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
  const auto step_of = [](int64_t step) { return at::scalar_tensor(step, at::kLong); };
  if (auto* s = dynamic_cast<AdamW8bitParamState*>(it->second.get())) {
    return {{"exp_avg_code", s->exp_avg_code()},
            {"exp_avg_absmax", s->exp_avg_absmax()},
            {"exp_avg_sq_code", s->exp_avg_sq_code()},
            {"exp_avg_sq_absmax", s->exp_avg_sq_absmax()},
            {"step", step_of(s->step())}};
  }
  if (auto* s = dynamic_cast<AdafactorParamState*>(it->second.get())) {
    std::map<std::string, at::Tensor> out = {{"step", step_of(s->step())}};
    if (s->exp_avg_sq_row().defined()) out["exp_avg_sq_row"] = s->exp_avg_sq_row();
    if (s->exp_avg_sq_col().defined()) out["exp_avg_sq_col"] = s->exp_avg_sq_col();
    if (s->exp_avg_sq().defined()) out["exp_avg_sq"] = s->exp_avg_sq();
    if (s->exp_avg().defined()) out["exp_avg"] = s->exp_avg();
    return out;
  }
  throw Error("optimizer state: unsupported optimizer state (Adam, AdamW, SGD, AdamW8bit and "
              "Adafactor are)");
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
  } else if (dynamic_cast<AdamW8bit*>(&optimizer) != nullptr) {
    state = adamw8bit_state(optimizer, param, kinds);
  } else if (dynamic_cast<Adafactor*>(&optimizer) != nullptr) {
    state = adafactor_state(param, kinds);
  } else {
    throw Error("optimizer state: unsupported optimizer (Adam, AdamW, SGD, AdamW8bit and "
                "Adafactor are)");
  }
  optimizer.state()[param.unsafeGetTensorImpl()] = std::move(state);
}

namespace {
// Calls with(state) for the parameter's state object when its type keeps a step count.
template <class With>
bool with_step_state(torch::optim::Optimizer& optimizer, const at::Tensor& param, With with) {
  auto& states = optimizer.state();
  auto it = states.find(param.unsafeGetTensorImpl());
  if (it == states.end()) return false;
  torch::optim::OptimizerParamState* s = it->second.get();
  if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(s)) return with(*a), true;
  if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(s)) return with(*a), true;
  if (auto* a = dynamic_cast<AdamW8bitParamState*>(s)) return with(*a), true;
  if (auto* a = dynamic_cast<AdafactorParamState*>(s)) return with(*a), true;
  return false;
}
}  // namespace

int64_t param_state_step(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  int64_t step = -1;
  with_step_state(optimizer, param, [&](auto& s) { step = s.step(); });
  return step;
}

void set_param_state_step(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                          int64_t step) {
  with_step_state(optimizer, param, [&](auto& s) { s.step(step); });
}

bool elementwise_state(const torch::optim::Optimizer& optimizer) {
  return dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr ||
         dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr ||
         dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr;
}

}  // namespace frugal
