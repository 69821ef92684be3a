#include "frugal/io/module_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <map>

#include "frugal/util/error.h"

namespace frugal::io {

NamedTensors module_state(const torch::nn::Module& module, const std::set<std::string>& skip) {
  NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (skip.count(p.key()) != 0 || !p.value().requires_grad()) continue;
    out.emplace_back(p.key(), p.value().detach().cpu().contiguous());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    out.emplace_back(b.key(), b.value().detach().cpu().contiguous());
  }
  return out;
}

void load_module_state(torch::nn::Module& module, const NamedTensors& state,
                       const std::string& what, const std::set<std::string>& skip) {
  std::map<std::string, at::Tensor> given(state.begin(), state.end());
  torch::NoGradGuard no_grad;
  auto copy_in = [&](const std::string& name, at::Tensor& dst) {
    auto it = given.find(name);
    if (it == given.end()) throw Error(fmt::format("{}: missing tensor '{}'", what, name));
    const at::Tensor& src = it->second;
    if (src.sizes() != dst.sizes() || src.scalar_type() != dst.scalar_type()) {
      throw Error(fmt::format("{}: tensor '{}' has shape {} {}, the model expects {} {}", what,
                              name, fmt::join(src.sizes(), "x"), c10::toString(src.scalar_type()),
                              fmt::join(dst.sizes(), "x"), c10::toString(dst.scalar_type())));
    }
    dst.copy_(src);
    given.erase(it);
  };
  for (auto& p : module.named_parameters(true)) {
    if (skip.count(p.key()) == 0 && p.value().requires_grad()) copy_in(p.key(), p.value());
  }
  for (auto& b : module.named_buffers(true)) copy_in(b.key(), b.value());
  if (!given.empty()) {
    throw Error(fmt::format("{}: unexpected tensor '{}' (not in the model)", what,
                            given.begin()->first));
  }
}

}  // namespace frugal::io
