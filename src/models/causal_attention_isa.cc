// Compiled three times (src/CMakeLists.txt), CPU_CAPABILITY = DEFAULT, AVX2, AVX512.
//
// Per query block of kBlock rows (keys 0 .. last row of the block, so the causal upper
// triangle past the block is skipped):
//   forward:  S = scale q k^T; P = softmax(S masked to j <= i); o = P v; lse = max + log(sum)
//   backward: P = exp(scale q k^T - lse) (recomputed, j <= i); dv += P^T do; dP = do v^T;
//             dS = P (dP - rowsum(do o)); dq = scale dS k; dk += scale dS^T q
// Each pair is computed by one thread from start to end, so results do not depend on the
// thread count.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "causal_attention_isa.h"

#include <stdexcept>

#define FRUGAL_CONCAT_(a, b) a##_##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_(a, b)

#ifdef FRUGAL_HAVE_WHEEL_SGEMM
// The Fortran BLAS entry point of the BLAS the torch wheel links (MKL on x86-64).
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);
#endif

namespace frugal::attention_isa {
namespace {

using Vec = at::vec::Vectorized<float>;

// Row-major C (M x N) = alpha op(A) op(B) + beta C, with 'N' / 'T' as seen row-major. BLAS is
// column-major, where a row-major matrix is its transpose: compute C^T = op(B)^T op(A)^T.
void gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
#ifdef FRUGAL_HAVE_WHEEL_SGEMM
  sgemm_(&tb, &ta, &m, &n, &k, &alpha, B, &la, A, &lb, &beta, C, &lc);
#else
  // Not reached: causal_self_attention only picks this kernel when it was built with BLAS.
  (void)m, (void)n, (void)k, (void)la, (void)lb, (void)lc, (void)A, (void)B, (void)C;
  (void)alpha, (void)beta;
  throw std::logic_error("frugal attention kernel built without BLAS");
#endif
}

float row_max(const float* x, int64_t n) {
  return at::vec::reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, x, n);
}

float row_sum(const float* x, int64_t n) {
  return at::vec::reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, x, n);
}

// x[j] = exp(x[j] - shift) for j < n.
void exp_shifted(float* x, int64_t n, float shift) {
  const Vec s(shift);
  at::vec::map([s](Vec a) { return (a - s).exp_u20(); }, x, x, n);
}

void scale_row(float* x, int64_t n, float factor) {
  const Vec f(factor);
  at::vec::map([f](Vec a) { return a * f; }, x, x, n);
}

void forward_fp32(const Pair<float>& p, float* S) {
  const int64_t T = p.T, D = p.D;
  for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, T - i0), keys = i0 + rows;
    gemm('N', 'T', rows, keys, D, p.scale, p.q + i0 * p.ld_qkv, p.ld_qkv, p.k, p.ld_qkv, 0.f,
         S, keys);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = S + r * keys;
      const int64_t n = i0 + r + 1;  // keys 0 .. i
      const float m = row_max(row, n);
      exp_shifted(row, n, m);
      const float sum = row_sum(row, n);
      scale_row(row, n, 1.f / sum);
      std::fill(row + n, row + keys, 0.f);
      p.lse[i0 + r] = m + std::log(sum);
    }
    gemm('N', 'N', rows, D, keys, 1.f, S, keys, p.v, p.ld_qkv, 0.f, p.o + i0 * p.ld_o, p.ld_o);
  }
}

void backward_fp32(const Pair<float>& p, float* work) {
  const int64_t T = p.T, D = p.D;
  float* P = work;
  float* dP = P + kBlock * T;
  float* Di = dP + kBlock * T;
  for (int64_t i = 0; i < T; ++i) {
    const float* o = p.o + i * p.ld_o;
    const float* d_o = p.d_o + i * p.ld_o;
    float acc = 0.f;
    for (int64_t d = 0; d < D; ++d) acc += o[d] * d_o[d];
    Di[i] = acc;
    std::fill(p.dk + i * p.ld_dkv, p.dk + i * p.ld_dkv + D, 0.f);
    std::fill(p.dv + i * p.ld_dkv, p.dv + i * p.ld_dkv + D, 0.f);
  }
  for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
    const int64_t rows = std::min(kBlock, T - i0), keys = i0 + rows;
    const float* q = p.q + i0 * p.ld_qkv;
    const float* d_o = p.d_o + i0 * p.ld_o;
    gemm('N', 'T', rows, keys, D, p.scale, q, p.ld_qkv, p.k, p.ld_qkv, 0.f, P, keys);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = P + r * keys;
      const int64_t n = i0 + r + 1;
      exp_shifted(row, n, p.lse[i0 + r]);
      std::fill(row + n, row + keys, 0.f);
    }
    gemm('T', 'N', keys, D, rows, 1.f, P, keys, d_o, p.ld_o, 1.f, p.dv, p.ld_dkv);
    gemm('N', 'T', rows, keys, D, 1.f, d_o, p.ld_o, p.v, p.ld_qkv, 0.f, dP, keys);
    for (int64_t r = 0; r < rows; ++r) {  // dS = P (dP - Di), into dP; zero where P is
      const Vec di(Di[i0 + r]);
      float* prob = P + r * keys;
      float* grad = dP + r * keys;
      at::vec::map2([di](Vec pr, Vec g) { return pr * (g - di); }, grad, prob, grad, keys);
    }
    gemm('N', 'N', rows, D, keys, p.scale, dP, keys, p.k, p.ld_qkv, 0.f, p.dq + i0 * p.ld_qkv,
         p.ld_qkv);
    gemm('T', 'N', keys, D, rows, p.scale, dP, keys, q, p.ld_qkv, 1.f, p.dk, p.ld_dkv);
  }
}

// bf16 <-> fp32 tiles: T rows of D, from / to a strided bf16 matrix.
void widen(const c10::BFloat16* src, int64_t ld, float* dst, int64_t T, int64_t D) {
  for (int64_t i = 0; i < T; ++i) at::vec::convert(src + i * ld, dst + i * D, D);
}
void narrow(const float* src, c10::BFloat16* dst, int64_t ld, int64_t T, int64_t D) {
  for (int64_t i = 0; i < T; ++i) at::vec::convert(src + i * D, dst + i * ld, D);
}

// The fp32 pair a bf16 pair is computed as: T x D tiles laid out one after another from
// `tiles` (the workspace sizes in causal_attention_isa.h count them): q, k, v widened from p
// and o (written by forward); for backward also o and d_o widened from p, and dq, dk, dv.
Pair<float> widened(const Pair<c10::BFloat16>& p, float* tiles, bool backward) {
  const int64_t T = p.T, D = p.D;
  auto next = [&] {
    float* tile = tiles;
    tiles += T * D;
    return tile;
  };
  Pair<float> f{};
  float* q = next();
  float* k = next();
  float* v = next();
  widen(p.q, p.ld_qkv, q, T, D);
  widen(p.k, p.ld_qkv, k, T, D);
  widen(p.v, p.ld_qkv, v, T, D);
  f.q = q;
  f.k = k;
  f.v = v;
  f.o = next();
  f.ld_qkv = f.ld_o = f.ld_dkv = D;
  f.lse = p.lse;
  f.T = T;
  f.D = D;
  f.scale = p.scale;
  if (backward) {
    float* d_o = next();
    widen(p.o, p.ld_o, f.o, T, D);
    widen(p.d_o, p.ld_o, d_o, T, D);
    f.d_o = d_o;
    f.dq = next();
    f.dk = next();
    f.dv = next();
  }
  return f;
}

}  // namespace

void FRUGAL_CONCAT(forward, CPU_CAPABILITY)(const Pair<float>& p, float* workspace) {
  forward_fp32(p, workspace);
}

void FRUGAL_CONCAT(forward_bf16, CPU_CAPABILITY)(const Pair<c10::BFloat16>& p, float* workspace) {
  const Pair<float> f = widened(p, workspace + kBlock * p.T, /*backward=*/false);
  forward_fp32(f, workspace);
  narrow(f.o, p.o, p.ld_o, p.T, p.D);
}

void FRUGAL_CONCAT(backward, CPU_CAPABILITY)(const Pair<float>& p, float* workspace) {
  backward_fp32(p, workspace);
}

void FRUGAL_CONCAT(backward_bf16, CPU_CAPABILITY)(const Pair<c10::BFloat16>& p, float* workspace) {
  const Pair<float> f = widened(p, workspace + 2 * kBlock * p.T + p.T, /*backward=*/true);
  backward_fp32(f, workspace);
  narrow(f.dq, p.dq, p.ld_qkv, p.T, p.D);
  narrow(f.dk, p.dk, p.ld_dkv, p.T, p.D);
  narrow(f.dv, p.dv, p.ld_dkv, p.T, p.D);
}

}  // namespace frugal::attention_isa
