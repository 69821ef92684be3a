#include "frugal/models/materialize.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "frugal/models/llama.h"
#include "frugal/models/lora.h"
#include "frugal/util/error.h"
#include "parameter_table.h"

namespace frugal {
namespace {

// The member of `owner` that its forward reads as parameter `name`, or null for a module kind
// this does not know.
at::Tensor* member_of(torch::nn::Module& owner, const std::string& name) {
  if (auto* m = dynamic_cast<torch::nn::LinearImpl*>(&owner)) {
    return name == "weight" ? &m->weight : name == "bias" ? &m->bias : nullptr;
  }
  if (auto* m = dynamic_cast<torch::nn::EmbeddingImpl*>(&owner)) {
    return name == "weight" ? &m->weight : nullptr;
  }
  if (auto* m = dynamic_cast<torch::nn::LayerNormImpl*>(&owner)) {
    return name == "weight" ? &m->weight : name == "bias" ? &m->bias : nullptr;
  }
  if (auto* m = dynamic_cast<RmsNormImpl*>(&owner)) return name == "weight" ? &m->weight : nullptr;
  if (auto* m = dynamic_cast<LoraDownImpl*>(&owner)) return name == "weight" ? &m->weight : nullptr;
  return nullptr;
}

}  // namespace

void materialize_parameter(torch::nn::Module& owner, const std::string& name, at::Tensor value) {
  const at::Tensor* old = owner.named_parameters(/*recurse=*/false).find(name);
  at::Tensor* member = member_of(owner, name);
  if (old == nullptr || member == nullptr) {
    throw Error(fmt::format("model: cannot give parameter '{}' of a {} its tensor after building "
                            "on the meta device (a module kind the loader does not know)",
                            name, owner.name()));
  }
  value.set_requires_grad(old->requires_grad());
  detail::ParameterTable::replace(owner, name, value);
  *member = value;
}

void materialize_without_values(torch::nn::Module& model, const c10::Device& device) {
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    torch::nn::Module& owner = *item.value();
    for (const auto& p : owner.named_parameters(/*recurse=*/false)) {
      at::Tensor value = at::empty(p.value().sizes(), p.value().options().device(device));
      // Its storage let go at once: the shape and dtype stay, the memory does not.
      c10::StorageImpl* storage = value.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(at::DataPtr(nullptr, device));
      storage->set_nbytes(0);
      materialize_parameter(owner, p.key(), value);
    }
  }
}

bool has_values(const torch::nn::Module& model) {
  for (const auto& p : model.parameters(/*recurse=*/true)) {
    return p.numel() == 0 || p.storage().nbytes() > 0;
  }
  return true;
}

}  // namespace frugal
