// Compiled three times (src/CMakeLists.txt): CPU_CAPABILITY = DEFAULT, AVX2, AVX512, each with
// its compiler flags; at::vec's Vectorized<float> is then 4, 8 or 16 lanes of real registers.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
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
      : grad_factor(c.grad_factor), omb1(c.one_minus_beta1), b2(c.beta2),
        omb2(c.one_minus_beta2), eps(c.eps), wd(c.weight_decay), decay(c.decay_factor), step_size(c.step_size),
        // One division per element (m / denom); sqrt(v) / sqrt(bc2) as a product with the
        // reciprocal, which rounds differently from torch's division by at most an ulp.
        inv_bc2(1.0f / c.bias_correction2_sqrt), decoupled(c.decoupled) {}
  Vec grad_factor, omb1, b2, omb2, eps, wd, decay, step_size, inv_bc2;
  bool decoupled;
};

// One vector of elements: p in registers (updated), moments in memory.
inline void update_vec(Vec& pv, Vec gv, float* m, float* v, const VecConsts& k) {
  Vec mv = Vec::loadu(m), vv = Vec::loadu(v);
  // Rounded to fp32 before use, as a separate clipping pass over fp32 gradients rounds it.
  gv = gv * k.grad_factor;
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

// The last n < Vec::size() elements, through the same vector arithmetic on zero-padded copies
// (zero moments and gradient give a zero update, never a NaN): every element rounds exactly
// as the vector body does, whatever the compiler would contract in scalar code.
inline void update_tail(float* p, const float* g, float* m, float* v, int64_t n, const VecConsts& k) {
  Vec pv = Vec::loadu(p, static_cast<int>(n));
  float mm[Vec::size()] = {}, vv[Vec::size()] = {};
  std::copy(m, m + n, mm);
  std::copy(v, v + n, vv);
  update_vec(pv, Vec::loadu(g, static_cast<int>(n)), mm, vv, k);
  pv.store(p, static_cast<int>(n));
  std::copy(mm, mm + n, m);
  std::copy(vv, vv + n, v);
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
  // The tail widened into fp32 buffers, stepped there, rounded back.
  const int64_t rest = n - i;
  float pf[BVec::size()], gf[BVec::size()];
  for (int64_t j = 0; j < rest; ++j) {
    pf[j] = static_cast<float>(p[i + j]);
    gf[j] = static_cast<float>(g[i + j]);
  }
  for (int64_t j = 0; j < rest; j += Vec::size()) {
    update_tail(pf + j, gf + j, m + i + j, v + i + j, std::min<int64_t>(Vec::size(), rest - j), k);
  }
  for (int64_t j = 0; j < rest; ++j) p[i + j] = static_cast<c10::BFloat16>(pf[j]);
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
  if (i < n) update_tail(p + i, g + i, m + i, v + i, n - i, k);
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
