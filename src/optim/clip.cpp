#include "frugal/optim/clip.h"

#include <ATen/ATen.h>

namespace frugal {

at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params) {
  at::Tensor total = at::zeros({}, at::TensorOptions().dtype(at::kDouble));
  for (const auto& p : params) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    at::Tensor n = at::linalg_vector_norm(g, 2).to(at::kDouble).cpu();
    total += n * n;
  }
  return total;
}

void clip_grads(const std::vector<at::Tensor>& params, double total_norm, double max_norm) {
  const double coef = max_norm / (total_norm + 1e-6);
  if (coef >= 1.0) return;
  for (const auto& p : params) {
    at::Tensor g = p.mutable_grad();
    if (g.defined()) g.mul_(coef);
  }
}

}  // namespace frugal
