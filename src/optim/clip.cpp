#include "frugal/optim/clip.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "cpu_isa.h"
#include "sum_squares_isa.h"

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

using SumSquaresFn = double (*)(const float*, int64_t);

SumSquaresFn sum_squares_kernel() {
  switch (best_cpu_isa()) {
    case CpuIsa::Avx512:
      return &sum_squares_isa::sum_squares_AVX512;
    case CpuIsa::Avx2:
      return &sum_squares_isa::sum_squares_AVX2;
    case CpuIsa::Default:
      break;
  }
  return &sum_squares_isa::sum_squares_DEFAULT;
}

// fp32 CPU gradients: one pass at the memory bandwidth, squares summed in fp64, split over
// ATen's threads (each thread's chunks summed apart, then in a fixed order).
double cpu_sum_squares(const std::vector<at::Tensor>& grads) {
  static const SumSquaresFn kernel = sum_squares_kernel();
  double total = 0.0;
  for (const at::Tensor& g : grads) {
    const float* x = g.const_data_ptr<float>();
    const int64_t n = g.numel();
    constexpr int64_t kChunk = 1 << 16;  // fixed chunks: the sum does not depend on threads
    std::vector<double> chunks((n + kChunk - 1) / kChunk, 0.0);
    at::parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        chunks[c] = kernel(x + c * kChunk, std::min(kChunk, n - c * kChunk));
      }
    });
    for (double c : chunks) total += c;
  }
  return total;
}

}  // namespace

at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params) {
  auto grads = defined_grads(params);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  if (grads.empty()) return at::zeros({}, f64);
  const bool cpu_fp32 = std::all_of(grads.begin(), grads.end(), [](const at::Tensor& g) {
    return g.device().is_cpu() && g.scalar_type() == at::kFloat && g.is_contiguous();
  });
  if (cpu_fp32) return at::scalar_tensor(cpu_sum_squares(grads), f64);
  // Elsewhere one foreach kernel for all per-tensor norms (as torch.nn.utils.clip_grad_norm_
  // does), then their squares summed in float64.
  auto norms = at::_foreach_norm(grads, 2);
  return at::stack(norms).to(at::kDouble).pow(2).sum().cpu();
}

double clip_coefficient(double total_norm, double max_norm) {
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

void clip_grads(const std::vector<at::Tensor>& params, double total_norm, double max_norm) {
  const double coef = clip_coefficient(total_norm, max_norm);
  if (coef >= 1.0) return;
  auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, coef);
}

}  // namespace frugal
