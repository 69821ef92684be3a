// Which kernels the built-in models' hot operations use (model.kernels in YAML; today the
// GPT's attention):
//   aten   ATen's own operators (at::scaled_dot_product_attention): CUDA and CPU, every
//          dtype, attention dropout;
//   frugal frugal's CPU kernels (causal_attention.h): fp32 / bf16 on CPU only;
//   auto   frugal's where they apply, ATen's elsewhere (the default).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace frugal {

enum class Kernels { Auto, Aten, Frugal };

// "auto" | "aten" | "frugal"; throws frugal::Error naming the key otherwise.
Kernels parse_kernels(const std::string& name, const std::string& key);

// frugal's kernels take CPU tensors of float32 or bfloat16.
bool frugal_kernels_take(const at::Tensor& t);

// Called first in the kernels' backward: their gradients carry no graph of their own, so a
// backward with create_graph (gradients of gradients) would silently miss terms. Throws.
void refuse_double_backward(const char* op);

}  // namespace frugal
