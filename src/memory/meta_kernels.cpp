#include "meta_kernels.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <array>
#include <optional>

namespace frugal::memory {
namespace {

at::Tensor index_select_meta(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  std::vector<int64_t> sizes = self.sizes().vec();
  if (!sizes.empty()) sizes[at::maybe_wrap_dim(dim, self.dim())] = index.numel();
  return at::empty(sizes, self.options());
}

// The statistics have the input's leading dimensions and ones for the normalised ones, as
// the CPU and CUDA kernels return them.
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_meta(
    const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  (void)weight, (void)bias, (void)eps;
  std::vector<int64_t> stat = input.sizes().vec();
  for (size_t i = 0; i < normalized_shape.size(); ++i) stat[stat.size() - 1 - i] = 1;
  auto stat_options = input.options().dtype(at::toOpMathType(input.scalar_type()));
  return {at::empty_like(input), at::empty(stat, stat_options), at::empty(stat, stat_options)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  (void)grad_out, (void)normalized_shape, (void)mean, (void)rstd;
  at::Tensor dx = mask[0] ? at::empty_like(input) : at::Tensor();
  at::Tensor dw = mask[1] && weight && weight->defined() ? at::empty_like(*weight) : at::Tensor();
  at::Tensor db = mask[2] && bias && bias->defined() ? at::empty_like(*bias) : at::Tensor();
  return {dx, dw, db};
}

at::Tensor& where_out_meta(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out) {
  out.resize_(at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes()));
  return out;
}

at::Tensor logical_not_meta(const at::Tensor& self) {
  return at::empty(self.sizes(), self.options().dtype(at::kBool));
}

at::Tensor logical_and_meta(const at::Tensor& self, const at::Tensor& other) {
  return at::empty(at::infer_size(self.sizes(), other.sizes()), self.options().dtype(at::kBool));
}

at::Tensor where_meta(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto sizes = at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
  return at::empty(sizes, self.options().dtype(at::result_type(self, other)));
}

at::Tensor embedding_backward_meta(const at::Tensor& grad, const at::Tensor& indices,
                                   c10::SymInt num_weights, c10::SymInt padding_idx,
                                   bool scale_grad_by_freq) {
  (void)indices, (void)padding_idx, (void)scale_grad_by_freq;
  return at::empty({num_weights.expect_int(), grad.size(-1)}, grad.options());
}

// Unary operators whose output is the input's shape and dtype.
at::Tensor same_as_input(const at::Tensor& self) { return at::empty_like(self); }

}  // namespace

void register_meta_kernels() {
  // Kept for the whole process: the registrations last as long as the Library object.
  static torch::Library* library = [] {
    auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta,
                                   __FILE__, __LINE__);
    lib->impl("index_select", TORCH_FN(index_select_meta));
    lib->impl("native_layer_norm", TORCH_FN(layer_norm_meta));
    lib->impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward_meta));
    lib->impl("where.self", TORCH_FN(where_meta));
    lib->impl("where.self_out", TORCH_FN(where_out_meta));
    lib->impl("relu", TORCH_FN(same_as_input));
    // The chunked loss's: logsumexp calls abs; ignored targets are masked.
    lib->impl("abs", TORCH_FN(same_as_input));
    lib->impl("logical_not", TORCH_FN(logical_not_meta));
    lib->impl("logical_and", TORCH_FN(logical_and_meta));  // Llama 3's rotary frequency scaling
    lib->impl("embedding_dense_backward", TORCH_FN(embedding_backward_meta));
    return lib;
  }();
  (void)library;
}

}  // namespace frugal::memory
