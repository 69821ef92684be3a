// The inner loop of frugal's fused CPU Adam, compiled once per instruction set (cpu_adam_isa.cc
// with CPU_CAPABILITY set to DEFAULT, AVX2 or AVX512, as ATen builds its own kernels): at::vec
// only uses AVX2 / AVX-512 registers when the file is compiled for them. cpu_adam.cpp picks
// the best one the running CPU supports.
#pragma once

#include <cstdint>

namespace frugal::cpu_adam_isa {

struct Consts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decay_factor;
  float step_size, bias_correction2_sqrt;
  bool decoupled;
};

using UpdateFn = void (*)(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c);

void update_DEFAULT(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c);
void update_AVX2(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c);
void update_AVX512(float* p, const float* g, float* m, float* v, int64_t n, const Consts& c);

}  // namespace frugal::cpu_adam_isa
