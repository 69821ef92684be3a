// NF4 weights (frugal/quant/nf4.h) without Python: the linear layer against at::linear through
// the dequantized weight (outputs and gradients, with and without autocast), what it keeps for
// backward (the tracked CPU allocator), the storage bytes, the errors for weights NF4 cannot
// hold, and the same on CUDA where there is one. The bit-exact comparison with torchao is
// tests/integration/test_nf4_python.cpp.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <algorithm>

#include "frugal/memory/cpu_tracking.h"
#include "frugal/quant/nf4.h"
#include "frugal/strategy/autocast.h"
#include "frugal/util/error.h"
#include "support/skip.h"

using namespace frugal;

namespace {

std::string nf4_error_of(const at::Tensor& w, const std::string& name) {
  try {
    nf4::quantize(w, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Nf4LinearGrads {
  at::Tensor y, grad_x, grad_bias;
};

// y and the gradients of x and bias for grad_y, through nf4::linear or at::linear.
template <typename Fn>
Nf4LinearGrads nf4_run_linear(const at::Tensor& x0, const at::Tensor& b0, const at::Tensor& grad_y,
                              Fn&& fn) {
  at::Tensor x = x0.detach().clone().requires_grad_(true);
  at::Tensor b = b0.detach().clone().requires_grad_(true);
  at::Tensor y = fn(x, b);
  y.backward(grad_y.to(y.scalar_type()));
  return {y.detach(), x.grad(), b.grad()};
}

// max |a - b| / max |b|.
double nf4_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bf = b.to(at::kFloat).cpu();
  return (a.to(at::kFloat).cpu() - bf).abs().max().item<double>() /
         std::max(bf.abs().max().item<double>(), 1e-30);
}

}  // namespace

TEST_CASE("nf4 linear: output and gradients equal at::linear through the dequantized weight",
          "[unit][nf4]") {
  at::manual_seed(5);
  const at::Tensor w = at::randn({128, 256}) * 0.05;
  const nf4::Nf4Weight q = nf4::quantize(w, "proj.weight");
  const at::Tensor dq = nf4::dequantize(q, at::kFloat);
  const at::Tensor x = at::randn({4, 7, 256});
  const at::Tensor bias = at::randn({128});
  const at::Tensor grad_y = at::randn({4, 7, 128});

  SECTION("fp32") {
    auto ours = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
      return nf4::linear(xx, q, bb);
    });
    auto ref = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
      return at::linear(xx, dq, bb);
    });
    CHECK(ours.y.scalar_type() == at::kFloat);
    CHECK(ours.grad_x.scalar_type() == at::kFloat);
    CHECK(torch::equal(ours.y, ref.y));  // the same at::linear on the same tensors
    CHECK(nf4_rel_diff(ours.grad_x, ref.grad_x) <= 1e-6);
    CHECK(nf4_rel_diff(ours.grad_bias, ref.grad_bias) <= 1e-6);
  }
  SECTION("bf16 autocast on the CPU") {
    Nf4LinearGrads ours, ref;
    {
      AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
      ours = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
        return nf4::linear(xx, q, bb);
      });
      ref = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
        return at::linear(xx, dq, bb);
      });
    }
    CHECK(ours.y.scalar_type() == at::kBFloat16);
    CHECK(ours.grad_x.scalar_type() == at::kFloat);  // x's dtype
    CHECK(ours.grad_bias.scalar_type() == at::kFloat);
    CHECK(torch::equal(ours.y, ref.y));
    CHECK(torch::equal(ours.grad_x, ref.grad_x));
    CHECK(nf4_rel_diff(ours.grad_bias, ref.grad_bias) <= 1e-2);
  }
  SECTION("no bias, x without grad: nothing to differentiate") {
    at::Tensor y = nf4::linear(x, q, std::nullopt);
    CHECK(!y.requires_grad());
    CHECK(torch::equal(y, at::linear(x, dq)));
  }
}

TEST_CASE("nf4 linear: the NF4 weight gets no gradient and is not an input of the graph",
          "[unit][nf4]") {
  at::manual_seed(6);
  const nf4::Nf4Weight q = nf4::quantize(at::randn({64, 256}), "w");
  at::Tensor x = at::randn({3, 256}).requires_grad_(true);
  at::Tensor b = at::zeros({64}).requires_grad_(true);
  at::Tensor y = nf4::linear(x, q, b);
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->next_edges().size() == 2);  // x and bias
  y.sum().backward();
  CHECK(x.grad().defined());
  CHECK(b.grad().defined());
  for (const at::Tensor& t : {q.codes, q.scaler_codes, q.scaler_factors, q.scaler_mean}) {
    CHECK(!t.requires_grad());
    CHECK(!t.grad().defined());
  }
  // Only x requiring grad: bias gets none, and backward still runs.
  at::Tensor x2 = at::randn({3, 256}).requires_grad_(true);
  at::Tensor b2 = at::zeros({64});
  nf4::linear(x2, q, b2).sum().backward();
  CHECK(x2.grad().defined());
  CHECK(!b2.grad().defined());
}

TEST_CASE("nf4 linear keeps only the NF4 tensors for backward, never the dequantized weight",
          "[unit][nf4][memory]") {
  memory::install_cpu_tracking();
  at::manual_seed(7);
  // A weight much larger than the activations: saving it would show at once.
  const at::Tensor w = at::randn({512, 1024});
  const nf4::Nf4Weight q = nf4::quantize(w, "big");
  const at::Tensor dq = nf4::dequantize(q, at::kFloat);
  const at::Tensor x0 = at::randn({2, 1024});
  const at::Tensor bias = at::randn({512});
  // Live bytes after forward minus before: the output and whatever autograd kept.
  auto kept_after_forward = [&](bool autocast, auto&& fn) {
    at::Tensor x = x0.clone().requires_grad_(true);
    at::Tensor b = bias.clone().requires_grad_(true);
    AutocastGuard guard(c10::DeviceType::CPU, at::kBFloat16, autocast);
    const int64_t before = memory::cpu_counters().current_bytes;
    at::Tensor y = fn(x, b);
    const int64_t kept = memory::cpu_counters().current_bytes - before - static_cast<int64_t>(y.nbytes());
    y.sum().backward();  // and backward works after it
    CHECK(x.grad().defined());
    return kept;
  };
  for (bool autocast : {false, true}) {
    INFO("autocast " << autocast);
    const int64_t ours = kept_after_forward(
        autocast, [&](const at::Tensor& x, const at::Tensor& b) { return nf4::linear(x, q, b); });
    const int64_t plain = kept_after_forward(
        autocast, [&](const at::Tensor& x, const at::Tensor& b) { return at::linear(x, dq, b); });
    // The NF4 tensors already exist: saving them allocates nothing.
    CHECK(ours == 0);
    // at::linear keeps its (cast) weight for x's gradient; under autocast that is a new bf16
    // copy, whose bytes are what nf4::linear does not keep.
    if (autocast) CHECK(plain >= static_cast<int64_t>(dq.numel() * 2));
  }
  CHECK(q.bytes() * 7 < static_cast<int64_t>(w.nbytes()));
}

TEST_CASE("nf4 storage: half a byte per weight plus the double-quantized scales",
          "[unit][nf4]") {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const nf4::Nf4Weight q = nf4::quantize(at::randn({128, 512}).to(dtype), "w");
    const int64_t numel = 128 * 512, item = dtype == at::kFloat ? 4 : 2;
    CHECK(q.codes.numel() == numel / 2);
    CHECK(q.codes.scalar_type() == at::kByte);
    CHECK(q.scaler_codes.numel() == numel / 64);
    CHECK(q.scaler_codes.scalar_type() == at::kChar);
    CHECK(q.scaler_factors.numel() == numel / (64 * 256));
    CHECK(q.scaler_factors.scalar_type() == dtype);
    CHECK(q.scaler_mean.dim() == 0);
    CHECK(q.scaler_mean.scalar_type() == dtype);
    CHECK(q.shape == std::vector<int64_t>{128, 512});
    CHECK(q.dtype == dtype);
    CHECK(q.bytes() == numel / 2 + numel / 64 + (numel / 16384 + 1) * item);
    // And the round trip stays within the levels' widest half gap of each block's absmax
    // (0.1385, between 0.7230 and 1) plus the scale's quantization.
    const at::Tensor w = at::randn({128, 512});
    const at::Tensor err = (nf4::dequantize(nf4::quantize(w, "w"), at::kFloat) - w).abs();
    CHECK(err.max().item<double>() < 0.16 * w.abs().max().item<double>());
  }
}

TEST_CASE("nf4 quantize in another dtype equals quantizing the converted weight, a chunk at a time",
          "[unit][nf4]") {
  // Several chunks of 65536 values and a short last one; bf16 weights quantized in fp32 (what
  // the loader does from a bf16 file) without converting the whole weight first.
  const at::Tensor w = (at::randn({5 * 65536 + 16384}) * 0.03).to(at::kBFloat16).view({-1, 256});
  const nf4::Nf4Weight a = nf4::quantize(w, "w", at::kFloat);
  const nf4::Nf4Weight b = nf4::quantize(w.to(at::kFloat), "w");
  CHECK(a.dtype == at::kFloat);
  CHECK(at::equal(a.codes, b.codes));
  CHECK(at::equal(a.scaler_codes, b.scaler_codes));
  CHECK(at::equal(a.scaler_factors, b.scaler_factors));
  CHECK(at::equal(a.scaler_mean, b.scaler_mean));
  // A non-contiguous weight reads the same values.
  const at::Tensor t = w.view({256, -1}).t();
  CHECK(at::equal(nf4::quantize(t, "t").codes, nf4::quantize(t.contiguous(), "t").codes));
}

TEST_CASE("nf4 quantize refuses weights whose size is not a multiple of 64 x 256 in one line",
          "[unit][nf4][bad_input]") {
  CHECK(nf4_error_of(at::zeros({100, 64}), "layers.0.mlp.up.weight") ==
        "nf4: cannot quantize 'layers.0.mlp.up.weight' of shape [100, 64] (6400 elements): NF4 "
        "needs a positive multiple of 16384 elements (blocks of 64, their scales quantized in "
        "groups of 256 blocks)");
  // A multiple of 64 but 255 blocks, not a multiple of 64, empty.
  CHECK_THAT(nf4_error_of(at::zeros({255, 64}), "a"),
             Catch::StartsWith("nf4: cannot quantize 'a' of shape [255, 64] (16320 elements)"));
  CHECK_THAT(nf4_error_of(at::zeros({3, 5}), "b"),
             Catch::StartsWith("nf4: cannot quantize 'b' of shape [3, 5] (15 elements)"));
  CHECK_THAT(nf4_error_of(at::zeros({0, 64}), "c"), Catch::Contains("positive multiple of 16384"));
  CHECK(nf4_error_of(at::zeros({64, 256}, at::kInt), "d") ==
        "nf4: cannot quantize 'd': expected a floating-point tensor, got Int");
  for (const std::string& m : {nf4_error_of(at::zeros({255, 64}), "a"),
                               nf4_error_of(at::zeros({3, 5}), "b")}) {
    CHECK(m.find('\n') == std::string::npos);
  }
  // Two full scale groups in any shape are fine (torchao also takes 1-D; frugal any rank).
  CHECK(nf4_error_of(at::randn({32768}), "e") == "(no error)");
  CHECK(nf4_error_of(at::randn({2, 64, 256}), "f") == "(no error)");
  // linear needs a 2-D weight and x's last dimension to match its columns.
  const nf4::Nf4Weight q = nf4::quantize(at::randn({64, 256}), "w");
  CHECK_THROWS_WITH(nf4::linear(at::randn({2, 255}), q, std::nullopt),
                    "nf4::linear: input of shape [2, 255] does not match a weight of shape [64, 256] "
                    "(expected 256 features last)");
}

TEST_CASE("nf4 on CUDA: quantize, dequantize and linear on the device", "[unit][nf4][cuda]") {
  if (test::skip_without_cuda()) return;
  at::manual_seed(8);
  const at::Tensor w = at::randn({256, 1024}) * 0.02;
  const nf4::Nf4Weight cpu = nf4::quantize(w, "w");
  const nf4::Nf4Weight gpu = nf4::quantize(w.cuda(), "w");
  CHECK(gpu.codes.is_cuda());
  CHECK(gpu.scaler_factors.is_cuda());
  // The values' codes are exact IEEE arithmetic on both. The absmaxes' mean is a reduction that
  // may differ in the last bit, which can move a scale code by one.
  CHECK(torch::equal(gpu.codes.cpu(), cpu.codes));
  CHECK((gpu.scaler_codes.cpu().to(at::kInt) - cpu.scaler_codes).abs().max().item<int>() <= 1);
  CHECK(nf4_rel_diff(gpu.scaler_mean, cpu.scaler_mean) <= 1e-6);
  const at::Tensor dq_gpu = nf4::dequantize(gpu, at::kFloat);
  CHECK(dq_gpu.is_cuda());
  CHECK(nf4_rel_diff(dq_gpu, nf4::dequantize(cpu, at::kFloat)) <= 1e-2);
  // linear on the device against at::linear through the device's dequantized weight.
  const at::Tensor x = at::randn({4, 9, 1024}).cuda(), grad_y = at::randn({4, 9, 256}).cuda();
  const at::Tensor bias = at::randn({256}).cuda();
  for (bool autocast : {false, true}) {
    INFO("autocast " << autocast);
    AutocastGuard guard(c10::DeviceType::CUDA, at::kBFloat16, autocast);
    auto ours = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
      return nf4::linear(xx, gpu, bb);
    });
    auto ref = nf4_run_linear(x, bias, grad_y, [&](const at::Tensor& xx, const at::Tensor& bb) {
      return at::linear(xx, dq_gpu, bb);
    });
    CHECK(ours.y.is_cuda());
    CHECK(ours.y.scalar_type() == (autocast ? at::kBFloat16 : at::kFloat));
    const double tol = autocast ? 1e-2 : 1e-5;
    CHECK(nf4_rel_diff(ours.y, ref.y) <= tol);
    CHECK(nf4_rel_diff(ours.grad_x, ref.grad_x) <= tol);
    CHECK(nf4_rel_diff(ours.grad_bias, ref.grad_bias) <= tol);
  }
}
