// GELU with the tanh approximation (GPT-2's), y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// With Kernels::Frugal (CPU, fp32 / bf16) the forward pass computes y and dy/dx in one pass,
// from one tanh, and keeps dy/dx instead of x (the same bytes): backward is one multiply,
// where ATen's gelu_backward evaluates the tanh a second time. Kernels::Aten is at::gelu;
// Kernels::Auto is frugal's where it applies.
#pragma once

#include <ATen/core/Tensor.h>

#include "frugal/models/kernels.h"

namespace frugal {

at::Tensor gelu_tanh(const at::Tensor& x, Kernels kernels = Kernels::Auto);

}  // namespace frugal
