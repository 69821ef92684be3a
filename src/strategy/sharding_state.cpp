// Sharding::state_dict / load_state_dict of the strategies whose ranks hold the whole model
// (none, ddp): the model's tensors and each parameter's optimizer state by name.
#include <fmt/format.h>
#include <torch/utils.h>

#include <set>

#include "frugal/io/module_state.h"
#include "frugal/optim/param_state.h"
#include "frugal/strategy/sharding.h"
#include "frugal/util/error.h"

namespace frugal {

namespace {
at::Tensor held(const StateHolder& holder, const at::Tensor& p) { return holder ? holder(p) : p; }
}  // namespace

const std::map<std::string, at::Tensor>& SavedState::whole_cached(const std::string& kind) {
  if (cached_kind_ != kind || cached_.empty()) {
    cached_ = whole(kind);
    cached_kind_ = kind;
  }
  return cached_;
}

int64_t SavedState::saved_numel(const std::string& kind, const std::string& name) {
  const auto& all = whole_cached(kind);
  auto it = all.find(name);
  return it == all.end() ? -1 : it->second.numel();
}

at::Tensor SavedState::read_range(const std::string& kind, const std::string& name, int64_t begin,
                                  int64_t count) {
  const auto& all = whole_cached(kind);
  auto it = all.find(name);
  if (it == all.end()) throw Error(fmt::format("{}: no {} of '{}'", what(), kind, name));
  return it->second.reshape({-1}).narrow(0, begin, count);
}

void SavedState::read_range_into(SavedRange& r) {
  at::Tensor values = read_range(r.kind, r.name, r.begin, r.count);
  if (r.into.defined()) {
    r.into.copy_(values.view(r.into.sizes()));
  } else {
    r.into = std::move(values);
  }
}

void SavedState::read_ranges(std::vector<SavedRange>& ranges) {
  for (SavedRange& r : ranges) read_range_into(r);
}

io::NamedTensors SavedState::model_except(const std::set<std::string>& skip) {
  io::NamedTensors out;
  for (const auto& [name, t] : model()) {
    if (skip.count(name) == 0) out.emplace_back(name, t);
  }
  return out;
}

void refuse_unreshardable(SavedState& saved, const std::string& kind) {
  if (reshardable_state_kind(kind)) return;
  throw Error(fmt::format("{}: its optimizer state '{}' (8-bit codes or factored moments) "
                          "belongs to the layout that wrote it and cannot be cut for another: "
                          "resume with the same strategy.sharding.mode and number of ranks",
                          saved.what(), kind));
}

StateDict Sharding::state_dict(const torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                               const StateHolder& holder) const {
  StateDict out;
  out.model = io::module_state(model);
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    for (const auto& [kind, t] : param_state_tensors(optimizer, held(holder, p.value()))) {
      out.optimizer.emplace_back(p.key() + "/" + kind, t.detach().cpu().contiguous());
    }
  }
  return out;
}

bool Sharding::load_state_dict(SavedState& saved, torch::nn::Module& model,
                               torch::optim::Optimizer& optimizer, const StateHolder& holder) {
  // Parameters and buffers: as saved whole, or put back together from shards.
  if (saved.has_shards()) {
    const auto whole = saved.whole("param");
    io::load_module_state(model, io::NamedTensors(whole.begin(), whole.end()), saved.what());
  } else {
    io::load_module_state(model, saved.model(), saved.what());
  }
  // The optimizer state, parameter by parameter.
  std::map<std::string, std::map<std::string, at::Tensor>> by_param;
  for (const std::string& kind : saved.optimizer_kinds()) {
    if (saved.has_shards()) refuse_unreshardable(saved, kind);
    for (auto& [name, t] : saved.whole(kind)) by_param[name][kind] = std::move(t);
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    auto it = by_param.find(p.key());
    if (it == by_param.end()) continue;  // not stepped yet (or frozen)
    set_param_state(optimizer, held(holder, p.value()), it->second);
    by_param.erase(it);
  }
  if (!by_param.empty()) {
    throw Error(fmt::format("{}: optimizer state for '{}', which is not a parameter of the model",
                            saved.what(), by_param.begin()->first));
  }
  return !saved.has_shards();
}

}  // namespace frugal
