#include "frugal/models/chunked_loss.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include "frugal/data/batch.h"
#include "frugal/models/kernels.h"
#include "frugal/util/autocast_dtype.h"
#include "frugal/util/error.h"

namespace frugal {

namespace {

// The dtype at::linear would compute the logits in here.
at::ScalarType matmul_dtype(const at::Tensor& hidden, const at::Tensor& weight) {
  if (const auto dtype = autocast_dtype(hidden.device().type())) return *dtype;
  return at::promote_types(hidden.scalar_type(), weight.scalar_type());
}

class ChunkedLinearCrossEntropy : public torch::autograd::Function<ChunkedLinearCrossEntropy> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& targets, int64_t chunk) {
    const at::ScalarType dtype = matmul_dtype(hidden, weight);
    const at::Tensor h = hidden.to(dtype), w = weight.to(dtype);
    const int64_t N = hidden.size(0);
    at::Tensor lse = at::empty({N}, hidden.options().dtype(at::kFloat));
    at::Tensor total = at::zeros({}, hidden.options().dtype(at::kFloat));
    for (int64_t start = 0; start < N; start += chunk) {
      const int64_t n = std::min(chunk, N - start);
      const at::Tensor logits = at::matmul(h.narrow(0, start, n), w.t()).to(at::kFloat);  // (n, V)
      const at::Tensor t = targets.narrow(0, start, n);
      const at::Tensor counted = t != kIgnoreIndex;
      const at::Tensor row_lse = logits.logsumexp(-1);
      const at::Tensor picked = logits.gather(1, t.clamp_min(0).unsqueeze(1)).squeeze(1);
      total += (row_lse - picked).masked_fill(counted.logical_not(), 0.0).sum();
      lse.narrow(0, start, n).copy_(row_lse);
    }
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["dtype"] = static_cast<int64_t>(dtype);
    ctx->save_for_backward({hidden, weight, targets, lse});
    return total;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    refuse_double_backward("chunked cross-entropy");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &targets = saved[2], &lse = saved[3];
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    const at::Tensor h = hidden.to(dtype), w = weight.to(dtype);
    const at::Tensor g = grads[0].to(at::kFloat);  // d(loss) of the sum: a scalar
    const int64_t N = hidden.size(0);
    at::Tensor grad_hidden = at::empty_like(hidden);
    // A frozen output projection (a fine-tuned model's tied embedding) gets no gradient: no
    // (V, C) buffer and no products for it.
    const bool weight_grad = ctx->needs_input_grad(1);
    at::Tensor grad_weight;
    if (weight_grad) grad_weight = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    for (int64_t start = 0; start < N; start += chunk) {
      const int64_t n = std::min(chunk, N - start);
      const at::Tensor hc = h.narrow(0, start, n);
      const at::Tensor t = targets.narrow(0, start, n);
      const at::Tensor counted = (t != kIgnoreIndex).to(at::kFloat);  // (n)
      // d/dlogits of (lse - logit[t]) = softmax - one_hot(t), per counted row, times g.
      at::Tensor d = (at::matmul(hc, w.t()).to(at::kFloat) - lse.narrow(0, start, n).unsqueeze(1)).exp_();
      d.scatter_add_(1, t.clamp_min(0).unsqueeze(1), -counted.unsqueeze(1));
      d.mul_((counted * g).unsqueeze(1));
      const at::Tensor dd = d.to(dtype);
      grad_hidden.narrow(0, start, n).copy_(at::matmul(dd, w));
      if (weight_grad) grad_weight.add_(at::matmul(dd.t(), hc));
    }
    return {grad_hidden, weight_grad ? grad_weight.to(weight.scalar_type()) : at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                        const at::Tensor& targets, int64_t chunk_tokens) {
  if (hidden.dim() != 2 || weight.dim() != 2 || hidden.size(1) != weight.size(1) ||
      targets.dim() != 1 || targets.size(0) != hidden.size(0) || chunk_tokens < 1) {
    throw Error("chunked_linear_cross_entropy: hidden (N, C), weight (V, C), targets (N), "
                "chunk_tokens >= 1");
  }
  return ChunkedLinearCrossEntropy::apply(hidden, weight, targets, chunk_tokens);
}

}  // namespace frugal
