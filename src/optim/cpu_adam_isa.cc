// Compiled three times (src/CMakeLists.txt): CPU_CAPABILITY = DEFAULT, AVX2, AVX512, each with
// its compiler flags; at::vec's Vectorized<float> is then 4, 8 or 16 lanes of real registers.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>

#include "cpu_adam_isa.h"

#define FRUGAL_CONCAT_(a, b) a##_##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_(a, b)

namespace frugal::cpu_adam_isa {

void FRUGAL_CONCAT(update, CPU_CAPABILITY)(float* p, const float* g, float* m, float* v, int64_t n,
                                           const Consts& c) {
  using Vec = at::vec::Vectorized<float>;
  const Vec omb1(c.one_minus_beta1), b2(c.beta2), omb2(c.one_minus_beta2);
  const Vec eps(c.eps), wd(c.weight_decay), decay(c.decay_factor), step_size(c.step_size);
  // One division per element (m / denom); sqrt(v) / sqrt(bc2) as a product with the
  // reciprocal, which rounds differently from torch's division by at most an ulp.
  const Vec inv_bc2(1.0f / c.bias_correction2_sqrt);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec pv = Vec::loadu(p + i), gv = Vec::loadu(g + i);
    Vec mv = Vec::loadu(m + i), vv = Vec::loadu(v + i);
    if (c.decoupled) {
      pv = pv * decay;
    } else {
      gv = at::vec::fmadd(wd, pv, gv);
    }
    mv = at::vec::fmadd(omb1, gv - mv, mv);
    vv = at::vec::fmadd(omb2 * gv, gv, b2 * vv);
    const Vec denom = at::vec::fmadd(vv.sqrt(), inv_bc2, eps);
    pv = pv - step_size * mv / denom;
    pv.store(p + i);
    mv.store(m + i);
    vv.store(v + i);
  }
  for (; i < n; ++i) {
    float pv = p[i], gv = g[i];
    if (c.decoupled) {
      pv *= c.decay_factor;
    } else {
      gv += c.weight_decay * pv;
    }
    m[i] += c.one_minus_beta1 * (gv - m[i]);
    v[i] = c.beta2 * v[i] + c.one_minus_beta2 * gv * gv;
    p[i] = pv - c.step_size * m[i] / (std::sqrt(v[i]) / c.bias_correction2_sqrt + c.eps);
  }
}

}  // namespace frugal::cpu_adam_isa
