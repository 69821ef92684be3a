#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <map>
#include <set>

#include "checked_weights.h"
#include "frugal/hf/folder.h"
#include "frugal/models/materialize.h"
#include "frugal/models/quantized_base.h"

namespace frugal::hf {

void load_weights_quantized(torch::nn::Module& model, const std::filesystem::path& dir,
                            const std::vector<std::string>& nf4_targets, const std::string& key) {
  torch::NoGradGuard no_grad;
  // Every check (names, shapes, NF4's sizes) before any tensor is read or any layer changes.
  std::map<std::string, at::Tensor> weights;
  for (auto& [name, t] : checked_weights(model, dir)) weights.emplace(name, std::move(t));
  std::set<std::string> quantized;
  for (const auto& [name, layer] : nf4_layers(model, nf4_targets, key)) quantized.insert(name);
  // Module by module, one tensor at a time, straight from the memory maps: a quantized weight is
  // read chunk by chunk into its NF4 codes (its full-precision tensor never exists), every other
  // parameter into a tensor of its own dtype.
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const std::string dot = item.key().empty() ? "" : item.key() + ".";
    auto* linear = dynamic_cast<torch::nn::LinearImpl*>(item.value().get());
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      const at::Tensor& source = weights.at(dot + p.key());
      if (linear != nullptr && p.key() == "weight" && quantized.count(item.key())) {
        set_nf4_weight(*linear, nf4::quantize(source, dot + p.key(), p.value().scalar_type()));
        continue;
      }
      at::Tensor value = at::empty(p.value().sizes(), p.value().options().device(at::kCPU));
      value.copy_(source);
      materialize_parameter(*item.value(), p.key(), value);
    }
  }
}

}  // namespace frugal::hf
