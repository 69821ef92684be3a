// Compiled three times (src/CMakeLists.txt), CPU_CAPABILITY = DEFAULT, AVX2, AVX512.
// With u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u):
//   y  = x/2 (1 + t)
//   dy = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#include <ATen/cpu/vec/vec.h>

#include <algorithm>

#include "gelu_isa.h"

#define FRUGAL_CONCAT_(a, b) a##_##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_(a, b)

namespace frugal::gelu_isa {
namespace {

using Vec = at::vec::Vectorized<float>;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

inline void gelu_vec(const Vec& x, Vec& y, Vec& dy) {
  const Vec half(0.5f), one(1.f), a(kSqrt2OverPi), b(kCubic), b3(3.f * kCubic);
  const Vec x2 = x * x;
  const Vec t = (a * x * (one + b * x2)).tanh();
  const Vec one_plus_t = one + t;
  y = half * x * one_plus_t;
  dy = half * one_plus_t + half * x * (one - t * t) * a * (one + b3 * x2);
}

// Runs gelu_vec over n floats; the tail goes through a zero-padded vector.
void forward_fp32(const float* x, float* y, float* dy, int64_t n) {
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec vy, vdy;
    gelu_vec(Vec::loadu(x + i), vy, vdy);
    vy.store(y + i);
    vdy.store(dy + i);
  }
  if (i < n) {
    const int64_t rest = n - i;
    Vec vy, vdy;
    gelu_vec(Vec::loadu(x + i, rest), vy, vdy);
    vy.store(y + i, rest);
    vdy.store(dy + i, rest);
  }
}

}  // namespace

void FRUGAL_CONCAT(forward, CPU_CAPABILITY)(const float* x, float* y, float* dy, int64_t n) {
  forward_fp32(x, y, dy, n);
}

void FRUGAL_CONCAT(forward_bf16, CPU_CAPABILITY)(const c10::BFloat16* x, c10::BFloat16* y,
                                                 c10::BFloat16* dy, int64_t n) {
  // Through fp32 in stack chunks (the arithmetic in fp32, as ATen's bf16 GELU does).
  constexpr int64_t kChunk = 1024;
  float xf[kChunk], yf[kChunk], dyf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    at::vec::convert(x + i, xf, m);
    forward_fp32(xf, yf, dyf, m);
    at::vec::convert(yf, y + i, m);
    at::vec::convert(dyf, dy + i, m);
  }
}

}  // namespace frugal::gelu_isa
