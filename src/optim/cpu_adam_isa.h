// The inner loop of frugal's fused CPU Adam, compiled once per instruction set (cpu_adam_isa.cc
// with CPU_CAPABILITY set to DEFAULT, AVX2 or AVX512, as ATen builds its own kernels): at::vec
// only uses AVX2 / AVX-512 registers when the file is compiled for them. cpu_adam.cpp picks
// the best one the running CPU supports.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace frugal::cpu_adam_isa {

struct Consts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor;
  float step_size, bias_correction2_sqrt;
  float grad_factor;  // every gradient is multiplied by it first (clipping folded in)
  bool decoupled;
};

// fp32 parameters and gradients; bf16 parameters with bf16 or fp32 gradients. Moments fp32.
using UpdateFn = void (*)(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c);
using UpdateBf16Fn = void (*)(c10::BFloat16* p, const c10::BFloat16* g, float* m, float* v,
                              int64_t n, const Consts& c);
using UpdateBf16Fp32GradFn = void (*)(c10::BFloat16* p, const float* g, float* m, float* v,
                                      int64_t n, const Consts& c);

struct Kernels {
  UpdateFn fp32;
  UpdateBf16Fn bf16;
  UpdateBf16Fp32GradFn bf16_fp32grad;
};

#define FRUGAL_CPU_ADAM_DECLARE(ISA)                                                          \
  void update_##ISA(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c); \
  void update_bf16_##ISA(c10::BFloat16* p, const c10::BFloat16* g, float* m, float* v,        \
                         int64_t n, const Consts& c);                                         \
  void update_bf16_fp32grad_##ISA(c10::BFloat16* p, const float* g, float* m, float* v,       \
                                  int64_t n, const Consts& c);
FRUGAL_CPU_ADAM_DECLARE(DEFAULT)
FRUGAL_CPU_ADAM_DECLARE(AVX2)
FRUGAL_CPU_ADAM_DECLARE(AVX512)
#undef FRUGAL_CPU_ADAM_DECLARE

}  // namespace frugal::cpu_adam_isa
