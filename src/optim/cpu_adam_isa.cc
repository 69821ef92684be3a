// Compiled three times (src/CMakeLists.txt): CPU_CAPABILITY = DEFAULT, AVX2, AVX512, each with
// its compiler flags; at::vec's Vectorized<float> is then 4, 8 or 16 lanes of real registers.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>
#include <type_traits>

#include "cpu_adam_isa.h"

#define FRUGAL_CONCAT_(a, b) a##_##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_(a, b)

namespace frugal::cpu_adam_isa {
namespace {

using Vec = at::vec::Vectorized<float>;
using BVec = at::vec::Vectorized<c10::BFloat16>;  // twice Vec's lanes

struct VecConsts {
  explicit VecConsts(const Consts& c)
      : omb1(c.one_minus_beta1), b2(c.beta2), omb2(c.one_minus_beta2), eps(c.eps),
        wd(c.weight_decay), decay(c.decay_factor), step_size(c.step_size),
        // One division per element (m / denom); sqrt(v) / sqrt(bc2) as a product with the
        // reciprocal, which rounds differently from torch's division by at most an ulp.
        inv_bc2(1.0f / c.bias_correction2_sqrt), decoupled(c.decoupled) {}
  Vec omb1, b2, omb2, eps, wd, decay, step_size, inv_bc2;
  bool decoupled;
};

// One vector of elements: p in registers (updated), moments in memory.
inline void update_vec(Vec& pv, Vec gv, float* m, float* v, const VecConsts& k) {
  Vec mv = Vec::loadu(m), vv = Vec::loadu(v);
  if (k.decoupled) {
    pv = pv * k.decay;
  } else {
    gv = at::vec::fmadd(k.wd, pv, gv);
  }
  mv = at::vec::fmadd(k.omb1, gv - mv, mv);
  vv = at::vec::fmadd(k.omb2 * gv, gv, k.b2 * vv);
  const Vec denom = at::vec::fmadd(vv.sqrt(), k.inv_bc2, k.eps);
  pv = pv - k.step_size * mv / denom;
  mv.store(m);
  vv.store(v);
}

inline float update_scalar(float pv, float gv, float* m, float* v, const Consts& c) {
  if (c.decoupled) {
    pv *= c.decay_factor;
  } else {
    gv += c.weight_decay * pv;
  }
  *m += c.one_minus_beta1 * (gv - *m);
  *v = c.beta2 * *v + c.one_minus_beta2 * gv * gv;
  return pv - c.step_size * *m / (std::sqrt(*v) / c.bias_correction2_sqrt + c.eps);
}

// bf16 parameters (gradients bf16 or fp32): widened to fp32 in registers, rounded once back.
template <typename G>
void update_bf16_params(c10::BFloat16* p, const G* g, float* m, float* v, int64_t n,
                        const Consts& c) {
  const VecConsts k(c);
  int64_t i = 0;
  for (; i + BVec::size() <= n; i += BVec::size()) {
    auto [p0, p1] = at::vec::convert_to_float<c10::BFloat16>(BVec::loadu(p + i));
    Vec g0, g1;
    if constexpr (std::is_same_v<G, c10::BFloat16>) {
      std::tie(g0, g1) = at::vec::convert_to_float<c10::BFloat16>(BVec::loadu(g + i));
    } else {
      g0 = Vec::loadu(g + i);
      g1 = Vec::loadu(g + i + Vec::size());
    }
    update_vec(p0, g0, m + i, v + i, k);
    update_vec(p1, g1, m + i + Vec::size(), v + i + Vec::size(), k);
    at::vec::convert_from_float<c10::BFloat16>(p0, p1).store(p + i);
  }
  for (; i < n; ++i) {
    p[i] = static_cast<c10::BFloat16>(
        update_scalar(static_cast<float>(p[i]), static_cast<float>(g[i]), m + i, v + i, c));
  }
}

}  // namespace

void FRUGAL_CONCAT(update, CPU_CAPABILITY)(float* p, const float* g, float* m, float* v, int64_t n,
                                           const Consts& c) {
  const VecConsts k(c);
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec pv = Vec::loadu(p + i);
    update_vec(pv, Vec::loadu(g + i), m + i, v + i, k);
    pv.store(p + i);
  }
  for (; i < n; ++i) p[i] = update_scalar(p[i], g[i], m + i, v + i, c);
}

void FRUGAL_CONCAT(update_bf16, CPU_CAPABILITY)(c10::BFloat16* p, const c10::BFloat16* g, float* m,
                                                float* v, int64_t n, const Consts& c) {
  update_bf16_params(p, g, m, v, n, c);
}

void FRUGAL_CONCAT(update_bf16_fp32grad, CPU_CAPABILITY)(c10::BFloat16* p, const float* g, float* m,
                                                         float* v, int64_t n, const Consts& c) {
  update_bf16_params(p, g, m, v, n, c);
}

}  // namespace frugal::cpu_adam_isa
