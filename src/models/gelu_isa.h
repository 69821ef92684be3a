// The elementwise pass of frugal's GELU (gelu.h), compiled once per instruction set like the
// fused Adam (src/optim/cpu_adam_isa.h): at::vec's tanh only uses AVX2 / AVX-512 registers
// when the file is compiled for them.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace frugal::gelu_isa {

// y[i] = gelu(x[i]), dy[i] = gelu'(x[i]), for i < n.
#define FRUGAL_GELU_DECLARE(ISA)                                                             \
  void forward_##ISA(const float* x, float* y, float* dy, int64_t n);                        \
  void forward_bf16_##ISA(const c10::BFloat16* x, c10::BFloat16* y, c10::BFloat16* dy, int64_t n);
FRUGAL_GELU_DECLARE(DEFAULT)
FRUGAL_GELU_DECLARE(AVX2)
FRUGAL_GELU_DECLARE(AVX512)
#undef FRUGAL_GELU_DECLARE

}  // namespace frugal::gelu_isa
