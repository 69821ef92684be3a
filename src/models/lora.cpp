#include "frugal/models/lora.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>
#include <set>

#include "frugal/models/quantized_base.h"
#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal {

double LoraOptions::scale() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

LoraDownImpl::LoraDownImpl(int64_t in, int64_t rank, double scale_, double dropout_)
    : scale(scale_), dropout(dropout_) {
  weight = register_parameter("weight", at::empty({rank, in}));
  // PEFT's initialisation of lora_A: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)).
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
}

namespace {

template <class T>
T* child_of(const torch::nn::LinearImpl& layer, const char* name) {
  // A plain linear layer has no children: the common case costs one empty check.
  for (const auto& item : layer.named_children()) {
    if (item.key() == name) return dynamic_cast<T*>(item.value().get());
  }
  return nullptr;
}

bool name_matches(const std::string& name, const std::string& target) {
  if (name == target) return true;
  return name.size() > target.size() && name.compare(name.size() - target.size(), target.size(),
                                                     target) == 0 &&
         name[name.size() - target.size() - 1] == '.';
}

bool is_output_head(const std::string& name) {
  return name == "lm_head" || name.size() > 8 && name.compare(name.size() - 8, 8, ".lm_head") == 0;
}

}  // namespace

LoraDownImpl* lora_down_of(const torch::nn::LinearImpl& layer) {
  if (layer.children().empty()) return nullptr;
  return child_of<LoraDownImpl>(layer, "lora_A");
}

torch::nn::LinearImpl* lora_up_of(const torch::nn::LinearImpl& layer) {
  if (layer.children().empty()) return nullptr;
  return child_of<torch::nn::LinearImpl>(layer, "lora_B");
}

at::Tensor lora_delta(const torch::nn::LinearImpl& layer, const at::Tensor& x) {
  LoraDownImpl* down = lora_down_of(layer);
  torch::nn::LinearImpl* up = lora_up_of(layer);
  ++down->calls;
  at::Tensor in = down->dropout > 0.0 ? at::dropout(x, down->dropout, down->is_training()) : x;
  // Under autocast the products run in its dtype (each input cast again, as autocast does);
  // without it, in the adapter's (fp32) dtype.
  if (!autocast_dtype(x.device().type())) in = in.to(down->weight.scalar_type());
  auto product = [](const at::Tensor& a, const at::Tensor& w) {
    return at::linear(autocast_meta_input(a), autocast_meta_input(w));
  };
  return product(product(in, down->weight), up->weight) * down->scale;
}

std::vector<std::pair<std::string, torch::nn::Linear>> linear_layers(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::nn::Linear>> out;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    auto linear = std::dynamic_pointer_cast<torch::nn::LinearImpl>(item.value());
    // An adapter's up projection is a linear layer too, never a target.
    if (!linear || item.key().find("lora_") != std::string::npos) continue;
    out.emplace_back(item.key(), torch::nn::Linear(linear));
  }
  return out;
}

std::vector<std::pair<std::string, torch::nn::Linear>> select_linear_layers(
    torch::nn::Module& module, const std::vector<std::string>& targets, const std::string& key) {
  if (targets.empty()) throw Error(key + ": names no layer");
  const bool all_linear = targets.size() == 1 && targets.front() == "all-linear";
  auto layers = linear_layers(module);
  std::vector<std::string> all_names;
  for (const auto& [name, layer] : layers) all_names.push_back(name);
  std::vector<std::pair<std::string, torch::nn::Linear>> chosen;
  std::set<std::string> unused(targets.begin(), targets.end());
  for (auto& [name, layer] : layers) {
    bool match = false;
    if (all_linear) {
      match = !is_output_head(name);
    } else {
      for (const auto& t : targets) {
        if (name_matches(name, t)) {
          match = true;
          unused.erase(t);
        }
      }
    }
    if (match) chosen.emplace_back(name, layer);
  }
  if (!all_linear && !unused.empty()) {
    throw Error(fmt::format("{}: '{}' matches no linear layer; the model's linear layers: {}", key,
                            *unused.begin(), fmt::join(all_names, ", ")));
  }
  if (chosen.empty()) {
    throw Error(fmt::format("{}: all-linear matches no linear layer besides the output head; the "
                            "model's linear layers: {}",
                            key, fmt::join(all_names, ", ")));
  }
  return chosen;
}

std::vector<std::string> apply_lora(torch::nn::Module& module, const LoraOptions& options,
                                    const std::string& what) {
  if (options.rank <= 0) throw Error(fmt::format("{}.rank: must be > 0, got {}", what, options.rank));
  if (!(options.alpha > 0.0)) {
    throw Error(fmt::format("{}.alpha: must be > 0, got {}", what, options.alpha));
  }
  if (!(options.dropout >= 0.0 && options.dropout < 1.0)) {
    throw Error(fmt::format("{}.dropout: must be in [0, 1), got {}", what, options.dropout));
  }
  const auto chosen = select_linear_layers(module, options.targets, what + ".targets");
  for (const auto& [name, layer] : chosen) {
    if (lora_down_of(*layer)) throw Error(fmt::format("{}: layer '{}' already has an adapter", what, name));
  }
  std::vector<std::string> adapted;
  for (auto [name, layer] : chosen) {
    const std::vector<int64_t> shape = linear_weight_shape(*layer);
    const at::Device device =
        layer->bias.defined() ? layer->bias.device()
                              : (layer->weight.defined() ? layer->weight.device() : at::Device(at::kCPU));
    auto down = std::make_shared<LoraDownImpl>(shape[1], options.rank, options.scale(),
                                               options.dropout);
    auto up = torch::nn::Linear(torch::nn::LinearOptions(options.rank, shape[0]).bias(false));
    {
      torch::NoGradGuard no_grad;
      up->weight.zero_();
    }
    down->to(device, at::kFloat);
    up->to(device, at::kFloat);
    layer->register_module("lora_A", down);
    layer->register_module("lora_B", up);
    adapted.push_back(name);
  }
  // Only the adapters train.
  for (auto& p : module.named_parameters(/*recurse=*/true)) {
    if (p.key().find(".lora_A.") == std::string::npos &&
        p.key().find(".lora_B.") == std::string::npos) {
      p.value().set_requires_grad(false);
    }
  }
  return adapted;
}

std::vector<std::string> freeze_parameters(torch::nn::Module& module,
                                           const std::vector<std::string>& patterns,
                                           const std::string& what) {
  std::vector<std::string> frozen;
  std::vector<std::string> names;
  for (auto& p : module.named_parameters(/*recurse=*/true)) names.push_back(p.key());
  for (const std::string& pattern : patterns) {
    bool any = false;
    for (auto& p : module.named_parameters(/*recurse=*/true)) {
      if (fnmatch(pattern.c_str(), p.key().c_str(), 0) != 0) continue;
      any = true;
      if (p.value().requires_grad()) {
        p.value().set_requires_grad(false);
        frozen.push_back(p.key());
      }
    }
    if (!any) {
      throw Error(fmt::format("{}: '{}' matches no parameter; the model's parameters: {}", what,
                              pattern, fmt::join(names, ", ")));
    }
  }
  return frozen;
}

void check_lora_used(torch::nn::Module& module) {
  for (const auto& [name, layer] : linear_layers(module)) {
    const LoraDownImpl* down = lora_down_of(*layer);
    if (down && down->calls == 0) {
      throw Error(fmt::format("LoRA: the adapter of '{}' was not used in the forward: its module "
                              "calls the layer directly; call frugal::linear({}, x) instead "
                              "(frugal/models/model.h)",
                              name, name));
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> merged_lora_weights(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, layer] : linear_layers(module)) {
    const LoraDownImpl* down = lora_down_of(*layer);
    if (!down) continue;
    // An NF4 base merges dequantized, in the dtype it was quantized from.
    const nf4::Nf4Weight* q = nf4_weight_of(*layer);
    const at::ScalarType dtype = q ? q->dtype : layer->weight.scalar_type();
    at::Tensor delta = at::matmul(lora_up_of(*layer)->weight.to(at::kFloat),
                                  down->weight.to(at::kFloat)) * down->scale;
    out.emplace_back(name + ".weight", (linear_weight(*layer, at::kFloat) + delta).to(dtype));
  }
  return out;
}

ParameterCounts count_parameters(const torch::nn::Module& module) {
  ParameterCounts c;
  for (const auto& p : module.parameters()) (p.requires_grad() ? c.trainable : c.frozen) += p.numel();
  return c;
}

}  // namespace frugal
