#include "frugal/optim/clip.h"

#include <ATen/ATen.h>

namespace frugal {
namespace {

std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace

at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params) {
  auto grads = defined_grads(params);
  if (grads.empty()) return at::zeros({}, at::TensorOptions().dtype(at::kDouble));
  // One foreach kernel for all per-tensor norms (as torch.nn.utils.clip_grad_norm_ does),
  // then their squares summed in float64.
  auto norms = at::_foreach_norm(grads, 2);
  return at::stack(norms).to(at::kDouble).pow(2).sum().cpu();
}

void clip_grads(const std::vector<at::Tensor>& params, double total_norm, double max_norm) {
  const double coef = max_norm / (total_norm + 1e-6);
  if (coef >= 1.0) return;
  auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, coef);
}

}  // namespace frugal
