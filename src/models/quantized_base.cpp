#include "frugal/models/quantized_base.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frugal/models/lora.h"
#include "frugal/util/error.h"
#include "parameter_table.h"

namespace frugal {
namespace {

void move_weight(nf4::Nf4Weight& w, torch::Device device, bool non_blocking) {
  for (at::Tensor* t : {&w.codes, &w.scaler_codes, &w.scaler_factors, &w.scaler_mean}) {
    *t = t->to(device, non_blocking);
  }
}

Nf4BaseImpl* base_of(const torch::nn::LinearImpl& layer) {
  if (layer.children().empty()) return nullptr;
  for (const auto& item : layer.named_children()) {
    if (item.key() == "weight_nf4") return dynamic_cast<Nf4BaseImpl*>(item.value().get());
  }
  return nullptr;
}

}  // namespace

void Nf4BaseImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  (void)dtype;
  move_weight(weight, device, non_blocking);
}
void Nf4BaseImpl::to(torch::Dtype dtype, bool non_blocking) { (void)dtype, (void)non_blocking; }
void Nf4BaseImpl::to(torch::Device device, bool non_blocking) {
  move_weight(weight, device, non_blocking);
}

const nf4::Nf4Weight* nf4_weight_of(const torch::nn::LinearImpl& layer) {
  const Nf4BaseImpl* base = base_of(layer);
  return base ? &base->weight : nullptr;
}

std::vector<int64_t> linear_weight_shape(const torch::nn::LinearImpl& layer) {
  if (const nf4::Nf4Weight* q = nf4_weight_of(layer)) return q->shape;
  return layer.weight.sizes().vec();
}

at::Tensor linear_weight(const torch::nn::LinearImpl& layer, at::ScalarType dtype) {
  if (const nf4::Nf4Weight* q = nf4_weight_of(layer)) return nf4::dequantize(*q, dtype);
  return layer.weight.detach().to(dtype);
}

std::vector<std::pair<std::string, torch::nn::Linear>> nf4_layers(
    torch::nn::Module& module, const std::vector<std::string>& targets, const std::string& key) {
  auto chosen = select_linear_layers(module, targets, key);
  for (const auto& [name, layer] : chosen) {
    if (nf4_weight_of(*layer)) continue;
    const int64_t n = layer->weight.numel(), unit = nf4::kBlock * nf4::kScalerBlock;
    if (n % unit != 0) {
      throw Error(fmt::format("{}: layer '{}' has a weight of shape [{}] ({} elements), not a "
                              "multiple of {} (NF4 blocks of {} values, their scales in groups of "
                              "{} blocks): leave it out of model.quantize_base.modules",
                              key, name, fmt::join(layer->weight.sizes(), ", "), n, unit,
                              nf4::kBlock, nf4::kScalerBlock));
    }
  }
  return chosen;
}

void set_nf4_weight(torch::nn::LinearImpl& layer, nf4::Nf4Weight q) {
  detail::ParameterTable::drop(layer, "weight");
  layer.weight = at::Tensor();  // the full-precision tensor is freed here
  layer.register_module("weight_nf4", std::make_shared<Nf4BaseImpl>(std::move(q)));
}

std::vector<std::string> quantize_linear_layers(torch::nn::Module& module,
                                                const std::vector<std::string>& targets,
                                                const std::string& key) {
  // Every size checked before any layer changes: a refused setting leaves the model whole.
  auto chosen = nf4_layers(module, targets, key);
  std::vector<std::string> out;
  for (auto& [name, layer] : chosen) {
    if (nf4_weight_of(*layer)) continue;
    set_nf4_weight(*layer, nf4::quantize(layer->weight.detach(), name + ".weight"));
    out.push_back(name);
  }
  return out;
}

}  // namespace frugal
