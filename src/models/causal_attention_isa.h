// The per-(batch, head) kernels of frugal's CPU causal attention (causal_attention.cpp),
// compiled once per instruction set like the fused Adam (src/optim/cpu_adam_isa.h): the
// softmax passes use at::vec, which only uses AVX2 / AVX-512 registers when the file is
// compiled for them. The matrix products go to the BLAS the torch wheel links (sgemm).
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace frugal::attention_isa {

// One (batch, query head) pair: T query/key rows of D features. q, k, v, o, do, dq, dk, dv
// are row-major T x D with their own row strides (the heads are column slices of the packed
// (B, T, C + 2 KV) projection, of the (B, T, C) output and of the gradients, so nothing is
// transposed or copied).
template <typename scalar_t>
struct Pair {
  const scalar_t* q; const scalar_t* k; const scalar_t* v;
  int64_t ld_qkv;          // row stride of q, k, v and dq (C + 2 KV)
  scalar_t* o;             // forward output, or the saved output in backward
  const scalar_t* d_o;     // backward: gradient of the output (row stride ld_o)
  int64_t ld_o;            // row stride of o and d_o (C)
  float* lse;              // T log-sum-exp values of the scaled, masked scores
  scalar_t* dq; scalar_t* dk; scalar_t* dv;  // backward
  int64_t ld_dkv;          // row stride of dk and dv
  int64_t T, D;
  float scale;
};

// Query rows per block: a block's scores (kBlock x T floats) stay in the core's L2, and keys
// past the block's last row are never touched (causal).
constexpr int64_t kBlock = 64;

// Workspace floats one call needs. bf16 pairs are widened to fp32 tiles first (q, k, v, o;
// in backward also the output gradient and the three input gradients).
inline int64_t forward_workspace(int64_t T, int64_t D, bool bf16) {
  return kBlock * T + (bf16 ? 4 * T * D : 0);
}
inline int64_t backward_workspace(int64_t T, int64_t D, bool bf16) {
  return 2 * kBlock * T + T + (bf16 ? 8 * T * D : 0);
}

#define FRUGAL_ATTENTION_DECLARE(ISA)                                              \
  void forward_##ISA(const Pair<float>& p, float* workspace);                      \
  void forward_bf16_##ISA(const Pair<c10::BFloat16>& p, float* workspace);         \
  void backward_##ISA(const Pair<float>& p, float* workspace);                     \
  void backward_bf16_##ISA(const Pair<c10::BFloat16>& p, float* workspace);
FRUGAL_ATTENTION_DECLARE(DEFAULT)
FRUGAL_ATTENTION_DECLARE(AVX2)
FRUGAL_ATTENTION_DECLARE(AVX512)
#undef FRUGAL_ATTENTION_DECLARE

}  // namespace frugal::attention_isa
