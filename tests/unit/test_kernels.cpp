// frugal's CPU attention against at::scaled_dot_product_attention (causal): outputs and
// gradients, fp32 and bf16, odd sizes (sequence not a multiple of the query block, one head,
// head size not a multiple of the vector width); and the rules of model.kernels.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/csrc/autograd/autograd.h>

#include "frugal/models/causal_attention.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

struct Result {
  at::Tensor out, grad;
};

Result run(const at::Tensor& qkv0, int64_t n_head, Kernels kernel, const at::Tensor& g,
           int64_t n_kv_head = 0) {
  at::Tensor qkv = qkv0.detach().clone().requires_grad_(true);
  at::Tensor out = causal_self_attention(qkv, n_head, 0.0, kernel, n_kv_head);
  out.backward(g);
  return {out.detach(), qkv.grad()};
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         b.to(at::kDouble).abs().max().item<double>();
}

}  // namespace

TEST_CASE("frugal's CPU attention equals scaled_dot_product_attention",
          "[unit][models][kernels]") {
  if (!frugal_attention_available()) {
    WARN("built without the wheel's BLAS: nothing to compare");
    return;
  }
  struct Shape { int64_t B, T, H, D; };
  for (Shape s :
       {Shape{2, 256, 4, 64}, Shape{3, 77, 1, 24}, Shape{1, 130, 3, 16}, Shape{2, 1, 2, 8}}) {
    CAPTURE(s.B, s.T, s.H, s.D);
    at::manual_seed(7);
    const int64_t C = s.H * s.D;
    at::Tensor qkv = at::randn({s.B, s.T, 3 * C});
    at::Tensor g = at::randn({s.B, s.T, C});
    Result ref = run(qkv, s.H, Kernels::Aten, g);
    Result got = run(qkv, s.H, Kernels::Frugal, g);
    CHECK(rel_err(got.out, ref.out) < 1e-5);
    CHECK(rel_err(got.grad, ref.grad) < 1e-5);

    // bf16 in and out (computed in fp32 inside): against sdpa on the same bf16 inputs in fp32.
    at::Tensor qkv16 = qkv.to(at::kBFloat16);
    at::Tensor g16 = g.to(at::kBFloat16);
    Result ref16 = run(qkv16.to(at::kFloat), s.H, Kernels::Aten, g16.to(at::kFloat));
    Result got16 = run(qkv16, s.H, Kernels::Frugal, g16);
    CHECK(got16.out.scalar_type() == at::kBFloat16);
    CHECK(got16.grad.scalar_type() == at::kBFloat16);
    CHECK(rel_err(got16.out, ref16.out) < 1e-2);
    CHECK(rel_err(got16.grad, ref16.grad) < 2e-2);
  }
}

// Grouped-query attention the long way: every key/value head repeated for the query heads it
// serves (plain multi-head attention), and the repeats' gradients summed back.
Result repeated_heads(const at::Tensor& qkv, int64_t H, int64_t KVH, const at::Tensor& g) {
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / (H + 2 * KVH), G = H / KVH;
  auto parts = qkv.split_with_sizes({H * D, KVH * D, KVH * D}, 2);
  auto repeat = [&](const at::Tensor& t) {
    return t.reshape({B, T, KVH, D}).repeat_interleave(G, 2).reshape({B, T, H * D});
  };
  Result r = run(at::cat({parts[0], repeat(parts[1]), repeat(parts[2])}, -1), H, Kernels::Aten,
                 g.to(at::kFloat));
  auto grads = r.grad.split(H * D, 2);
  auto fold = [&](const at::Tensor& t) { return t.reshape({B, T, KVH, G, D}).sum(3).reshape({B, T, KVH * D}); };
  return {r.out, at::cat({grads[0], fold(grads[1]), fold(grads[2])}, -1)};
}

TEST_CASE("grouped-query attention: frugal's kernel and SDPA equal the heads repeated",
          "[unit][models][kernels]") {
  struct Shape { int64_t B, T, H, KVH, D; };
  for (Shape s : {Shape{2, 130, 6, 2, 16}, Shape{1, 77, 4, 1, 24}, Shape{3, 64, 8, 4, 8}}) {
    CAPTURE(s.B, s.T, s.H, s.KVH, s.D);
    at::manual_seed(11);
    at::Tensor qkv = at::randn({s.B, s.T, (s.H + 2 * s.KVH) * s.D});
    at::Tensor g = at::randn({s.B, s.T, s.H * s.D});
    const Result ref = repeated_heads(qkv, s.H, s.KVH, g);
    std::vector<Kernels> kernels = {Kernels::Aten};
    if (frugal_attention_available()) kernels.push_back(Kernels::Frugal);
    for (Kernels k : kernels) {
      CAPTURE(k == Kernels::Frugal);
      Result got = run(qkv, s.H, k, g, s.KVH);
      CHECK(got.grad.sizes() == qkv.sizes());
      CHECK(rel_err(got.out, ref.out) < 1e-5);
      CHECK(rel_err(got.grad, ref.grad) < 1e-5);
    }
    if (!frugal_attention_available()) continue;
    // bf16 in and out: against the repeated heads on the same bf16 inputs in fp32.
    at::Tensor qkv16 = qkv.to(at::kBFloat16), g16 = g.to(at::kBFloat16);
    const Result ref16 = repeated_heads(qkv16.to(at::kFloat), s.H, s.KVH, g16);
    Result got16 = run(qkv16, s.H, Kernels::Frugal, g16, s.KVH);
    CHECK(got16.grad.scalar_type() == at::kBFloat16);
    CHECK(rel_err(got16.out, ref16.out) < 1e-2);
    CHECK(rel_err(got16.grad, ref16.grad) < 2e-2);
  }
  CHECK_THROWS_WITH(causal_self_attention(at::randn({1, 4, 5 * 8}), 3, 0.0, Kernels::Auto, 2),
                    Catch::Contains("n_head a multiple of n_kv_head"));
}

TEST_CASE("frugal's CPU attention does not depend on the thread count",
          "[unit][models][kernels]") {
  if (!frugal_attention_available()) {
    WARN("built without the wheel's BLAS: nothing to compare");
    return;
  }
  at::manual_seed(3);
  at::Tensor qkv = at::randn({2, 100, 3 * 32});
  at::Tensor g = at::randn({2, 100, 32});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  Result one = run(qkv, 2, Kernels::Frugal, g);
  // Grouped-query attention: 4 query heads of 8 features share each of 2 key/value heads.
  at::Tensor gqa = at::randn({2, 100, (4 + 2 * 2) * 8});
  Result one_gqa = run(gqa, 4, Kernels::Frugal, g, 2);
  at::set_num_threads(2);
  Result two = run(qkv, 2, Kernels::Frugal, g);
  Result two_gqa = run(gqa, 4, Kernels::Frugal, g, 2);
  at::set_num_threads(threads);
  CHECK(at::equal(one.out, two.out));
  CHECK(at::equal(one.grad, two.grad));
  CHECK(at::equal(one_gqa.out, two_gqa.out));
  CHECK(at::equal(one_gqa.grad, two_gqa.grad));
}

TEST_CASE("model.kernels: auto falls back to ATen, frugal refuses what it cannot do",
          "[unit][models][kernels]") {
  CHECK(parse_kernels("frugal", "model.kernels") == Kernels::Frugal);
  CHECK(parse_kernels("aten", "model.kernels") == Kernels::Aten);
  CHECK(parse_kernels("auto", "model.kernels") == Kernels::Auto);
  CHECK_THROWS_WITH(parse_kernels("flash", "model.kernels"),
                    Catch::Contains("model.kernels") && Catch::Contains("auto, aten or frugal"));
  // Gradients of gradients would silently miss terms: refused.
  at::Tensor x = at::randn({1, 8, 3 * 8}).requires_grad_(true);
  at::Tensor y = causal_self_attention(x, 2, 0.0, Kernels::Frugal).sum();
  CHECK_THROWS_WITH(
      torch::autograd::grad({y}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true),
      Catch::Contains("no second derivative"));
  CHECK_NOTHROW(torch::autograd::grad({y}, {x}));
  at::Tensor qkv = at::randn({1, 8, 3 * 8});
  // Dropout on the probabilities: only ATen's kernel has it, so auto takes it and frugal refuses.
  CHECK_NOTHROW(causal_self_attention(qkv, 2, 0.1, Kernels::Auto));
  CHECK_THROWS_WITH(causal_self_attention(qkv, 2, 0.1, Kernels::Frugal),
                    Catch::Contains("no attention dropout"));
  CHECK_THROWS_WITH(causal_self_attention(qkv.to(at::kHalf), 2, 0.0, Kernels::Frugal),
                    Catch::Contains("float32 or bfloat16"));
  CHECK_THROWS_WITH(causal_self_attention(at::randn({1, 8, 10}), 2, 0.0, Kernels::Auto),
                    Catch::Contains("(B, T, (n_head + 2 n_kv_head) D)"));
}
