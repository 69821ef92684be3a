// Per-module figures for TensorBoard (include/frugal/train/tensorboard.h): parameters grouped
// by the module that holds them directly, so a block's attention and MLP show apart.
#include <ATen/ATen.h>

#include <cmath>

#include "frugal/train/tensorboard.h"

namespace frugal {
namespace {

// Each module with parameters of its own (not its children's), by path; the model's own
// parameters under "(root)". Visiting named_modules keeps the model's order.
template <class Fn>
void for_each_module_params(const torch::nn::Module& model, Fn&& fn) {
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const auto own = item.value()->named_parameters(/*recurse=*/false);
    if (own.is_empty()) continue;
    std::vector<at::Tensor> tensors;
    for (const auto& p : own) tensors.push_back(p.value());
    fn(item.key().empty() ? std::string("(root)") : item.key(), tensors);
  }
}

}  // namespace

void add_module_histograms(TensorBoardWriter& writer, const torch::nn::Module& model,
                           int64_t step) {
  std::vector<std::pair<std::string, double>> norms;
  for_each_module_params(model, [&](const std::string& name, const std::vector<at::Tensor>& ps) {
    std::vector<at::Tensor> flat;
    for (const auto& p : ps) flat.push_back(p.detach().flatten());
    const at::Tensor values = at::cat(flat);
    writer.add_histogram("params/" + name, values, step);
    norms.emplace_back("param_norm/" + name, values.to(at::kDouble).norm().item<double>());
  });
  writer.add_scalars(norms, step);
}

std::map<std::string, double> module_grad_norms(const torch::nn::Module& model) {
  std::map<std::string, double> out;
  for_each_module_params(model, [&](const std::string& name, const std::vector<at::Tensor>& ps) {
    double squares = 0.0;
    bool any = false;
    for (const auto& p : ps) {
      if (!p.grad().defined()) continue;
      squares += p.grad().detach().to(at::kDouble).square().sum().item<double>();
      any = true;
    }
    if (any) out[name] = std::sqrt(squares);
  });
  return out;
}

}  // namespace frugal
