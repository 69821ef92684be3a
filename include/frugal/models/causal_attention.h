// Causal self-attention from the packed projection qkv (B, T, C + 2 KV) to (B, T, C): C =
// n_head D query features, then keys and values of KV = n_kv_head D features each (3C when
// n_kv_head is n_head; fewer key/value heads is grouped-query attention, each serving
// n_head / n_kv_head query heads without being repeated).
// With Kernels::Aten: at::scaled_dot_product_attention (flash / memory-efficient kernels, CUDA
// and CPU; the only one with attention dropout). With Kernels::Frugal, frugal's CPU kernel
// (src/models/causal_attention.cpp): flash-style (saves only the output and one log-sum-exp
// per row, recomputes the probabilities in backward), the products on the BLAS the torch
// wheel links, one (batch, head) pair per thread, fp32 or bf16 in (bf16 computed in fp32). It
// reads the heads straight from qkv and writes the output as (B, T, C) and the gradient as one
// (B, T, C + 2 KV) tensor: no head transposes, copies, repeats or concatenation. Kernels::Auto: frugal's
// where it applies (CPU, fp32 / bf16, no attention dropout), ATen's elsewhere.
#pragma once

#include <ATen/core/Tensor.h>

#include "frugal/models/kernels.h"

namespace frugal {

// Whether frugal's CPU kernel was built (it needs the wheel's BLAS; see src/CMakeLists.txt).
bool frugal_attention_available();

// dropout_p > 0 applies to the attention probabilities (ATen's kernel only). n_kv_head 0
// means n_head.
at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t n_head, double dropout_p,
                                 Kernels kernels = Kernels::Auto, int64_t n_kv_head = 0);

}  // namespace frugal
