#include "frugal/models/causal_attention.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <type_traits>

#include "../optim/cpu_isa.h"
#include "causal_attention_isa.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

struct IsaKernels {
  void (*forward)(const attention_isa::Pair<float>&, float*);
  void (*forward_bf16)(const attention_isa::Pair<c10::BFloat16>&, float*);
  void (*backward)(const attention_isa::Pair<float>&, float*);
  void (*backward_bf16)(const attention_isa::Pair<c10::BFloat16>&, float*);
};

const IsaKernels& isa_kernels() {
  using namespace attention_isa;
  static const IsaKernels k = []() -> IsaKernels {
    switch (best_cpu_isa()) {
      case CpuIsa::Avx512:
        return {&forward_AVX512, &forward_bf16_AVX512, &backward_AVX512, &backward_bf16_AVX512};
      case CpuIsa::Avx2:
        return {&forward_AVX2, &forward_bf16_AVX2, &backward_AVX2, &backward_bf16_AVX2};
      case CpuIsa::Default:
        break;
    }
    return {&forward_DEFAULT, &forward_bf16_DEFAULT, &backward_DEFAULT, &backward_bf16_DEFAULT};
  }();
  return k;
}

// H query heads and KVH key/value heads of D features; a row of the packed projection is
// [q (C = H D) | k (KV = KVH D) | v (KV)], W = C + 2 KV wide. G = H / KVH query heads share
// each key/value head (1 without grouped-query attention).
struct Dims {
  int64_t B, T, C, KV, W, H, G, D;
};

Dims dims_of(const at::Tensor& qkv, int64_t n_head, int64_t n_kv_head) {
  const int64_t W = qkv.size(2), D = W / (n_head + 2 * n_kv_head);
  return {qkv.size(0), qkv.size(1), n_head * D, n_kv_head * D, W, n_head, n_head / n_kv_head, D};
}

// Where backward writes each query head's dk and dv: T rows of stride ld, head h's dk at
// columns h D and its dv at C + h D. Without grouped-query attention that is the gradient's
// own key/value columns; with it, a (B, T, 2C) buffer of per-query-head parts that are then
// summed over each group.
template <typename scalar_t>
struct KeyValueGrads {
  scalar_t* base = nullptr;
  int64_t ld = 0;
};

// One pair's pointers: query head h of batch b, and its key/value head h / G, are column
// slices of the packed tensors.
template <typename scalar_t>
attention_isa::Pair<scalar_t> pair_of(const Dims& d, int64_t pair, const scalar_t* qkv,
                                      scalar_t* o, const scalar_t* d_o, float* lse,
                                      scalar_t* dqkv = nullptr, KeyValueGrads<scalar_t> dkv = {}) {
  const int64_t b = pair / d.H, h = pair % d.H, kv = h / d.G;
  const int64_t row = b * d.T * d.W, q_at = h * d.D, k_at = d.C + kv * d.D;
  attention_isa::Pair<scalar_t> p{};
  p.q = qkv + row + q_at;
  p.k = qkv + row + k_at;
  p.v = qkv + row + k_at + d.KV;
  p.ld_qkv = d.W;
  p.o = o + b * d.T * d.C + h * d.D;
  p.d_o = d_o ? d_o + b * d.T * d.C + h * d.D : nullptr;
  p.ld_o = d.C;
  p.lse = lse + pair * d.T;
  if (dqkv) {
    p.dq = dqkv + row + q_at;
    p.dk = dkv.base + b * d.T * dkv.ld + h * d.D;
    p.dv = p.dk + d.C;
    p.ld_dkv = dkv.ld;
  }
  p.T = d.T;
  p.D = d.D;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.D)));
  return p;
}

// Runs fn(pair, workspace) over all (batch, query head) pairs, one pair per task; each
// thread's workspace comes from the CPU allocator, so memory accounting sees it.
template <typename Fn>
void for_each_pair(const Dims& d, int64_t workspace_floats, const Fn& fn) {
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    at::Tensor workspace = at::empty({workspace_floats}, at::TensorOptions().dtype(at::kFloat));
    for (int64_t pair = begin; pair < end; ++pair) fn(pair, workspace.data_ptr<float>());
  });
}

template <typename T>
using PairKernel = void (*)(const attention_isa::Pair<T>&, float*);

template <typename T>
void run_forward(const Dims& d, const at::Tensor& qkv, at::Tensor& out, at::Tensor& lse,
                 PairKernel<T> kernel) {
  const int64_t ws = attention_isa::forward_workspace(d.T, d.D, std::is_same_v<T, c10::BFloat16>);
  for_each_pair(d, ws, [&](int64_t pair, float* w) {
    kernel(pair_of<T>(d, pair, qkv.const_data_ptr<T>(), out.data_ptr<T>(), nullptr,
                      lse.data_ptr<float>(), nullptr),
           w);
  });
}

template <typename T>
void run_backward(const Dims& d, const at::Tensor& qkv, const at::Tensor& out,
                  const at::Tensor& d_out, const at::Tensor& lse, at::Tensor& dqkv,
                  PairKernel<T> kernel) {
  const int64_t ws =
      attention_isa::backward_workspace(d.T, d.D, std::is_same_v<T, c10::BFloat16>);
  // Query heads that share a key/value head write their parts of its gradient side by side;
  // the parts are summed afterwards (in a fixed order: the result does not depend on the
  // thread count). The buffer lives only during this backward.
  at::Tensor parts;
  KeyValueGrads<T> dkv{dqkv.data_ptr<T>() + d.C, d.W};
  if (d.G > 1) {
    parts = at::empty({d.B, d.T, 2 * d.C}, dqkv.options());
    dkv = {parts.data_ptr<T>(), 2 * d.C};
  }
  // The pair struct is shared with forward, whose output is written: in backward o and lse
  // are only read.
  T* o = const_cast<T*>(out.const_data_ptr<T>());
  float* l = const_cast<float*>(lse.const_data_ptr<float>());
  for_each_pair(d, ws, [&](int64_t pair, float* w) {
    kernel(pair_of<T>(d, pair, qkv.const_data_ptr<T>(), o, d_out.const_data_ptr<T>(), l,
                      dqkv.data_ptr<T>(), dkv),
           w);
  });
  if (d.G > 1) {
    const int64_t KVH = d.H / d.G;
    dqkv.narrow(2, d.C, 2 * d.KV)
        .view({d.B, d.T, 2, KVH, d.D})
        .copy_(parts.view({d.B, d.T, 2, KVH, d.G, d.D}).sum(4));
  }
}

class FrugalAttention : public torch::autograd::Function<FrugalAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& packed,
                            int64_t n_head, int64_t n_kv_head) {
    at::Tensor qkv = packed.contiguous();
    const Dims d = dims_of(qkv, n_head, n_kv_head);
    at::Tensor out = at::empty({d.B, d.T, d.C}, qkv.options());
    at::Tensor lse = at::empty({d.B, d.H, d.T}, qkv.options().dtype(at::kFloat));
    if (qkv.is_meta()) {
      // A traced step: the outputs' shapes are all it needs.
    } else if (qkv.scalar_type() == at::kBFloat16) {
      run_forward<c10::BFloat16>(d, qkv, out, lse, isa_kernels().forward_bf16);
    } else {
      run_forward<float>(d, qkv, out, lse, isa_kernels().forward);
    }
    ctx->saved_data["n_head"] = n_head;
    ctx->saved_data["n_kv_head"] = n_kv_head;
    ctx->save_for_backward({qkv, out, lse});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    refuse_double_backward("attention");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& qkv = saved[0];
    const at::Tensor& out = saved[1];
    const at::Tensor& lse = saved[2];
    const Dims d =
        dims_of(qkv, ctx->saved_data["n_head"].toInt(), ctx->saved_data["n_kv_head"].toInt());
    at::Tensor d_out = grads[0].to(out.scalar_type()).contiguous();
    at::Tensor dqkv = at::empty_like(qkv);
    if (qkv.is_meta()) {
    } else if (qkv.scalar_type() == at::kBFloat16) {
      run_backward<c10::BFloat16>(d, qkv, out, d_out, lse, dqkv, isa_kernels().backward_bf16);
    } else {
      run_backward<float>(d, qkv, out, d_out, lse, dqkv, isa_kernels().backward);
    }
    return {dqkv, at::Tensor(), at::Tensor()};
  }
};

bool frugal_kernel_applies(const at::Tensor& qkv, double dropout_p) {
  return frugal_attention_available() && frugal_kernels_take(qkv) && dropout_p == 0.0;
}

at::Tensor sdpa(const at::Tensor& qkv, int64_t n_head, int64_t n_kv_head, double dropout_p) {
  const Dims d = dims_of(qkv, n_head, n_kv_head);
  auto parts = qkv.split_with_sizes({d.C, d.KV, d.KV}, /*dim=*/2);
  auto heads = [&](const at::Tensor& t, int64_t n) {  // (B, T, n D) -> (B, n, T, D)
    return t.view({d.B, d.T, n, d.D}).transpose(1, 2);
  };
  at::Tensor y = at::scaled_dot_product_attention(
      heads(parts[0], n_head), heads(parts[1], n_kv_head), heads(parts[2], n_kv_head),
      /*attn_mask=*/{}, dropout_p, /*is_causal=*/true, /*scale=*/std::nullopt,
      /*enable_gqa=*/d.G > 1);  // (B, H, T, D)
  return y.transpose(1, 2).contiguous().view({d.B, d.T, d.C});
}

}  // namespace

bool frugal_attention_available() {
#ifdef FRUGAL_HAVE_WHEEL_SGEMM
  return true;
#else
  return false;
#endif
}

at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t n_head, double dropout_p,
                                 Kernels kernels, int64_t n_kv_head) {
  if (n_kv_head <= 0) n_kv_head = n_head;
  const int64_t heads = n_head + 2 * n_kv_head;
  if (qkv.dim() != 3 || n_head % n_kv_head != 0 || qkv.size(2) % heads != 0) {
    throw Error("causal_self_attention: qkv must be (B, T, (n_head + 2 n_kv_head) D), with "
                "n_head a multiple of n_kv_head");
  }
  const bool frugal = kernels == Kernels::Frugal ||
                      (kernels == Kernels::Auto && frugal_kernel_applies(qkv, dropout_p));
  if (!frugal) return sdpa(qkv, n_head, n_kv_head, dropout_p);
  if (!frugal_kernel_applies(qkv, dropout_p)) {
    throw Error(std::string("model.kernels: frugal's attention runs on CPU with float32 or "
                            "bfloat16 activations and no attention dropout") +
                (frugal_attention_available() ? "" : " (not built: no BLAS sgemm in the wheel)") +
                "; use auto or aten");
  }
  return FrugalAttention::apply(qkv, n_head, n_kv_head);
}

}  // namespace frugal
