// Low-bit optimizer states: the 8-bit dynamic maps and blockwise quantization, AdamW8bit
// against torch::optim::AdamW (the same step from the same moments; and from exact fp32
// moments, within a bound derived from the maps' code gaps), Adafactor against its formulas
// computed here in double precision, the state's bytes per parameter, and a save / load of
// the quantized state that resumes bit for bit.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/optim/adamw.h>

#include <cmath>

#include "frugal/io/tensor_io.h"
#include "frugal/optim/adafactor.h"
#include "frugal/optim/adamw8bit.h"
#include "frugal/optim/param_state.h"
#include "frugal/optim/quant8.h"

using namespace frugal;

namespace {

// Half the widest gap between neighbouring codes: the worst rounding error of a value, in
// units of its block's absmax. The widest gaps are the top decade's linear steps, 0.9 / 64
// (signed: 6 fraction bits there) and 0.9 / 128 (unsigned: 7).
constexpr double kSignedHalfGap = 0.9 / 64 / 2;
constexpr double kUnsignedHalfGap = 0.9 / 128 / 2;

// Values whose blocks span eight decades of scale, with a tail block of 37.
at::Tensor spread_values(int64_t block, bool positive) {
  at::manual_seed(7);
  const int64_t n = block * 5 + 37;
  at::Tensor x = at::randn({n}, at::kFloat);
  at::Tensor scale = at::pow(10.0, at::arange(n, at::kFloat).div(block, "floor") * 2 - 4);
  x = x * scale;
  return positive ? x * x : x;
}

double max_of(const at::Tensor& t) { return t.max().item<double>(); }

// Each value's block absmax, per value.
at::Tensor block_absmax(const at::Tensor& x, int64_t block) {
  const int64_t n = x.numel(), blocks = quant8::block_count(n, block);
  at::Tensor padded = at::zeros({blocks * block});
  padded.narrow(0, 0, n).copy_(x.reshape({-1}));
  return padded.view({blocks, block}).abs().amax(1).repeat_interleave(block).narrow(0, 0, n)
      .view(x.sizes());
}

// The most quantizing can move each value: half the gap between the two codes around
// value / absmax, times the absmax; for the unsigned map's first gap (0 to the smallest
// code) the whole gap, since never_flush rounds such values up.
at::Tensor rounding_bound(const at::Tensor& x, int64_t block, bool is_signed) {
  const at::Tensor absmax = block_absmax(x, block);
  const at::Tensor map = quant8::dynamic_map(is_signed);
  const at::Tensor hi = at::searchsorted(map, (x / absmax).reshape({-1})).clamp(1, 255);
  at::Tensor gap = (map.take(hi) - map.take(hi - 1)) / 2;
  if (!is_signed) gap = at::where(hi == 1, gap * 2, gap);
  return absmax * gap.view(x.sizes());
}

}  // namespace

TEST_CASE("dynamic 8-bit maps: the tree's codes, sorted", "[unit][optim]") {
  const at::Tensor s = quant8::dynamic_map(true), u = quant8::dynamic_map(false);
  REQUIRE(s.numel() == 256);
  REQUIRE(u.numel() == 256);
  CHECK(at::equal(std::get<0>(s.sort()), s));
  CHECK(at::equal(std::get<0>(u.sort()), u));
  CHECK(s[0].item<float>() == -1.0f);
  CHECK(s[255].item<float>() == 1.0f);
  CHECK(u[0].item<float>() == 0.0f);
  CHECK(u[255].item<float>() == 1.0f);
  // Zero twice in the signed map (sign bit over a zero magnitude), at 127 and 128.
  CHECK(s[127].item<float>() == 0.0f);
  CHECK(s[128].item<float>() == 0.0f);
  CHECK(std::get<0>(at::_unique2(s)).numel() == 255);
  CHECK(std::get<0>(at::_unique2(u)).numel() == 256);
  // Smallest non-zero magnitudes: 10^-6 (signed, 6 exponent zeros) and 10^-7 (unsigned).
  CHECK(s[129].item<float>() == Approx(1e-6).epsilon(1e-6));
  CHECK(u[1].item<float>() == Approx(1e-7).epsilon(1e-6));
  // The widest gaps are the top decade's steps.
  CHECK(max_of(s.diff(1, 0)) == Approx(2 * kSignedHalfGap).epsilon(1e-5));
  CHECK(max_of(u.diff(1, 0)) == Approx(2 * kUnsignedHalfGap).epsilon(1e-5));
  // 64 signed codes and 128 unsigned in the top decade (0.1, 1].
  CHECK((s > 0.1f).sum().item<int64_t>() == 64);
  CHECK((u > 0.1f).sum().item<int64_t>() == 128);
}

TEST_CASE("blockwise quantization: round trip within half a code gap of each block's absmax",
          "[unit][optim]") {
  for (int64_t block : {256, 2048}) {
    for (bool is_signed : {true, false}) {
      INFO("block " << block << (is_signed ? " signed" : " unsigned"));
      const at::Tensor x = spread_values(block, !is_signed);
      const int64_t n = x.numel(), blocks = quant8::block_count(n, block);
      const quant8::Quantized q = quant8::quantize(x, is_signed, block);
      REQUIRE(q.codes.scalar_type() == at::kByte);
      REQUIRE(q.codes.numel() == n);
      REQUIRE(q.absmax.numel() == blocks);
      const at::Tensor back = quant8::dequantize(q.codes, q.absmax, is_signed, block);
      // Per-value bound: half the gap of the two codes around value / absmax.
      const at::Tensor per_value_max = block_absmax(x, block);
      CHECK(at::equal(q.absmax, per_value_max.index({at::arange(blocks) * block})));
      const at::Tensor err = (back - x).abs();
      CHECK(at::all(err <= rounding_bound(x, block, is_signed) * (1 + 1e-5) + 1e-30).item<bool>());
      // Overall: within the widest half gap of the absmax; the maxima themselves exact.
      const double half_gap = is_signed ? kSignedHalfGap : kUnsignedHalfGap;
      CHECK(max_of(err / per_value_max) <= half_gap * (1 + 1e-5));
      CHECK(max_of(err / per_value_max) > half_gap * 0.5);  // the bound is nearly reached
      const at::Tensor at_max = x.abs() == per_value_max;
      CHECK(at::equal(back.masked_select(at_max), x.masked_select(at_max)));
      // Codes are a fixed point: dequantized values quantize to the same codes.
      const quant8::Quantized again = quant8::quantize(back, is_signed, block);
      CHECK(at::equal(again.codes, q.codes));
      CHECK(at::equal(again.absmax, q.absmax));
    }
  }
  // A value below half the smallest code rounds to 0, unless never_flush keeps it positive.
  const at::Tensor tiny = at::tensor({1.0f, 1e-9f, 0.0f});
  const at::Tensor flushed = quant8::dequantize(
      quant8::quantize(tiny, false, 256).codes, at::ones({1}), false, 256);
  CHECK(flushed[1].item<float>() == 0.0f);
  const quant8::Quantized kept = quant8::quantize(tiny, false, 256, /*never_flush=*/true);
  const at::Tensor kept_back = quant8::dequantize(kept.codes, kept.absmax, false, 256);
  CHECK(kept_back[1].item<float>() == Approx(1e-7).epsilon(1e-5));
  CHECK(kept_back[2].item<float>() == 0.0f);
  // All-zero blocks.
  const quant8::Quantized z = quant8::zeros(300, true, 256, at::TensorOptions());
  CHECK(at::equal(quant8::dequantize(z.codes, z.absmax, true, 256), at::zeros({300})));
}

namespace {

struct AdamCase {
  at::Tensor param, grad, m, v;
};

// A 300 x 7 matrix: 2100 values, so blocks of 256 leave a tail of 52.
AdamCase adam_case() {
  at::manual_seed(11);
  AdamCase c;
  c.param = at::randn({300, 7});
  c.grad = at::randn({300, 7}) * 0.1;
  c.m = at::randn({300, 7}) * 0.05;
  c.v = at::rand({300, 7}) * at::rand({300, 7}) * 0.01;  // spread over decades
  return c;
}

constexpr int64_t kStepsBefore = 9;  // the state is that of step 9; the test step is 10

torch::optim::AdamWOptions fp32_options() {
  return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1);
}

AdamW8bitOptions q_options(int64_t block) {
  return AdamW8bitOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1).block(block);
}

// One torch::optim::AdamW step from moments m, v.
at::Tensor fp32_step(const AdamCase& c, const at::Tensor& m, const at::Tensor& v) {
  at::Tensor p = c.param.clone().requires_grad_(true);
  torch::optim::AdamW opt({p}, fp32_options());
  auto s = std::make_unique<torch::optim::AdamWParamState>();
  s->step(kStepsBefore);
  s->exp_avg(m.clone());
  s->exp_avg_sq(v.clone());
  opt.state()[p.unsafeGetTensorImpl()] = std::move(s);
  p.mutable_grad() = c.grad.clone();
  opt.step();
  return p.detach();
}

struct Stepped8bit {
  at::Tensor param;
  std::unique_ptr<AdamW8bit> opt;
};

// One AdamW8bit step from m and v quantized.
Stepped8bit q8_step(const AdamCase& c, int64_t block) {
  at::Tensor p = c.param.clone().requires_grad_(true);
  auto opt = std::make_unique<AdamW8bit>(std::vector<at::Tensor>{p}, q_options(block));
  const quant8::Quantized qm = quant8::quantize(c.m, true, block);
  const quant8::Quantized qv = quant8::quantize(c.v, false, block, true);
  set_param_state(*opt, p, {{"step", at::scalar_tensor(kStepsBefore, at::kLong)},
                            {"exp_avg_code", qm.codes},
                            {"exp_avg_absmax", qm.absmax},
                            {"exp_avg_sq_code", qv.codes},
                            {"exp_avg_sq_absmax", qv.absmax}});
  p.mutable_grad() = c.grad.clone();
  opt->step();
  return {p, std::move(opt)};
}

}  // namespace

TEST_CASE("adamw8bit: from the same moments, torch's AdamW step bit for bit, requantized",
          "[unit][optim]") {
  const AdamCase c = adam_case();
  for (int64_t block : {256, 2048}) {
    INFO("block " << block);
    const quant8::Quantized qm = quant8::quantize(c.m, true, block);
    const quant8::Quantized qv = quant8::quantize(c.v, false, block, true);
    // torch's AdamW from the dequantized moments computes what AdamW8bit computes.
    const at::Tensor m0 = quant8::dequantize(qm.codes, qm.absmax, true, block).view({300, 7});
    const at::Tensor v0 = quant8::dequantize(qv.codes, qv.absmax, false, block).view({300, 7});
    const Stepped8bit q = q8_step(c, block);
    CHECK(at::equal(q.param.detach(), fp32_step(c, m0, v0)));
    // The state kept is the new moments, requantized.
    const at::Tensor m1 = m0 * 0.9 + c.grad * (1 - 0.9);
    const auto kinds = param_state_tensors(*q.opt, q.param);
    CHECK(kinds.at("step").item<int64_t>() == kStepsBefore + 1);
    const quant8::Quantized expect = quant8::quantize(m1, true, block);
    const at::Tensor mismatched = kinds.at("exp_avg_code").ne(expect.codes);
    // Rounding of m1 itself (mul + add vs this expression) may move a value over a boundary.
    CHECK(mismatched.sum().item<int64_t>() <= 2);
    CHECK(at::allclose(kinds.at("exp_avg_absmax"), expect.absmax, 1e-6, 0));
  }
}

TEST_CASE("adamw8bit: one step against fp32 AdamW from exact moments, within the derived bound",
          "[unit][optim]") {
  // fp32 AdamW holds m0, v0 exactly; AdamW8bit holds them quantized, each value within
  // e = absmax * (half the gap of the codes around value / absmax) of its block (at most
  // 0.9/128 of the absmax for m, 0.9/256 for v; less for smaller values: the map is
  // dynamic). After the step on the same gradient, m1 and v1 differ by at most dm = b1 e(m0)
  // and dv = b2 e(v0), so with c = lr / (1 - b1^t), d(v) = sqrt(v / (1 - b2^t)) + eps:
  //   |p - p8| <= c (dm / d(v1 - dv) + |m1| max(1/d(v1 - dv) - 1/d(v1), 1/d(v1) - 1/d(v1 + dv)))
  // elementwise (the decay and the rest of the step are the same arithmetic).
  const AdamCase c = adam_case();
  const double b1 = 0.9, b2 = 0.99, lr = 1e-2, eps = 1e-8, t = kStepsBefore + 1;
  const at::Tensor exact = fp32_step(c, c.m, c.v);
  for (int64_t block : {256, 2048}) {
    INFO("block " << block);
    const at::Tensor q = q8_step(c, block).param.detach();
    const at::Tensor dm = b1 * rounding_bound(c.m, block, true);
    const at::Tensor dv = b2 * rounding_bound(c.v, block, false);
    CHECK(max_of(dm / block_absmax(c.m, block)) <= b1 * kSignedHalfGap * (1 + 1e-5));
    const at::Tensor m1 = c.m * b1 + c.grad * (1 - b1);
    const at::Tensor v1 = c.v * b2 + c.grad * c.grad * (1 - b2);
    const double bc2 = 1 - std::pow(b2, t), step = lr / (1 - std::pow(b1, t));
    auto d = [&](const at::Tensor& v) { return (v.clamp_min(0) / bc2).sqrt() + eps; };
    const at::Tensor lo = d(v1 - dv), mid = d(v1), hi = d(v1 + dv);
    const at::Tensor bound =
        step * (dm / lo + m1.abs() * at::maximum(1 / lo - 1 / mid, 1 / mid - 1 / hi));
    const at::Tensor diff = (q - exact).abs();
    CHECK(at::all(diff <= bound * (1 + 1e-4) + 1e-6 * exact.abs()).item<bool>());
    // The quantized state does change the step, by a fraction of the step itself.
    const double update = (exact - c.param * (1 - lr * 0.1)).abs().mean().item<double>();
    CHECK(diff.max().item<double>() > 0);
    CHECK(diff.mean().item<double>() < 0.05 * update);
    // And the bound says something: on average a small fraction of the update.
    CHECK(bound.mean().item<double>() < 0.1 * update);
    WARN("block " << block << ": mean |p8 - p32| " << diff.mean().item<double>() << " (mean update "
                  << update << ", mean bound " << bound.mean().item<double>() << ")");
  }
}

TEST_CASE("adamw8bit: state is 2 bytes per value plus 8 per block", "[unit][optim]") {
  at::manual_seed(3);
  // A GPT-mini-like set: embeddings, a 3C projection, a bias, an odd-sized tail.
  std::vector<at::Tensor> params;
  for (auto shape : std::vector<std::vector<int64_t>>{{256, 128}, {384, 128}, {128}, {37, 11}}) {
    params.push_back(at::randn(shape).requires_grad_(true));
  }
  int64_t numel = 0;
  for (const auto& p : params) numel += p.numel();
  for (int64_t block : {256, 2048}) {
    for (auto& p : params) p.mutable_grad() = at::randn_like(p);
    AdamW8bit opt(params, q_options(block));
    opt.step();
    int64_t bytes = 0, blocks = 0;
    for (const auto& p : params) {
      blocks += quant8::block_count(p.numel(), block);
      for (const auto& [kind, t] : param_state_tensors(opt, p)) {
        if (kind != "step") bytes += static_cast<int64_t>(t.nbytes());
      }
    }
    const double per_param = static_cast<double>(bytes) / static_cast<double>(numel);
    WARN("adamw8bit block " << block << ": " << per_param << " bytes of state per parameter");
    CHECK(bytes == 2 * numel + 8 * blocks);
    CHECK(per_param <= (block == 256 ? 2.1 : 2.01));
  }
}

namespace {

// Adafactor from the paper's formulas, in double, with the row / column sums of Algorithm 4.
struct AdafactorReference {
  at::Tensor x, r, c, v, m;
  int64_t t = 0;
  double beta1 = 0;  // with a first moment: m = beta1 m + (1 - beta1) alpha u, the step
  void step(const at::Tensor& g32, double lr, double wd, bool scale_parameter) {
    const at::Tensor g = g32.to(at::kDouble);
    ++t;
    const double b2 = 1 - std::pow(static_cast<double>(t), -0.8);
    const double alpha =
        scale_parameter ? lr * std::max(1e-3, std::sqrt(x.pow(2).mean().item<double>())) : lr;
    const at::Tensor g2 = g * g + 1e-30;
    at::Tensor vhat;
    if (x.dim() == 2) {
      if (t == 1) {
        r = at::zeros({x.size(0)}, at::kDouble);
        c = at::zeros({x.size(1)}, at::kDouble);
      }
      r = b2 * r + (1 - b2) * g2.sum(1);
      c = b2 * c + (1 - b2) * g2.sum(0);
      vhat = at::outer(r, c) / r.sum();
    } else {
      if (t == 1) v = at::zeros_like(x);
      v = b2 * v + (1 - b2) * g2;
      vhat = v;
    }
    at::Tensor u = g / vhat.sqrt();
    const double rms = std::sqrt(u.pow(2).mean().item<double>());
    u = u / std::max(1.0, rms / 1.0);
    if (beta1 > 0) {
      m = (t == 1 ? at::zeros_like(x) : m) * beta1 + (1 - beta1) * alpha * u;
      x = x - alpha * wd * x - m;
    } else {
      x = x - alpha * wd * x - alpha * u;
    }
  }
};

}  // namespace

TEST_CASE("adafactor: factored second moment, clipped update, as the paper's formulas",
          "[unit][optim]") {
  for (auto [scale_parameter, beta1] : {std::pair{true, 0.0}, std::pair{false, 0.0},
                                        std::pair{true, 0.9}, std::pair{false, 0.8}}) {
    INFO("scale_parameter " << scale_parameter << ", beta1 " << beta1);
    at::manual_seed(5);
    at::Tensor w = at::randn({12, 9}) * 0.3, b = at::randn({9});
    std::vector<at::Tensor> params = {w.clone().requires_grad_(true), b.clone().requires_grad_(true)};
    Adafactor opt(params, AdafactorOptions(0.05).weight_decay(0.1).scale_parameter(scale_parameter).beta1(beta1));
    AdafactorReference rw{w.to(at::kDouble)}, rb{b.to(at::kDouble)};
    rw.beta1 = rb.beta1 = beta1;
    for (int step = 0; step < 4; ++step) {
      // Gradients with row and column structure, so that factoring is not exact.
      const at::Tensor gw = at::randn({12, 9}) * at::linspace(0.1, 2, 9) + 0.05;
      const at::Tensor gb = at::randn({9}) * 0.5;
      params[0].mutable_grad() = gw;
      params[1].mutable_grad() = gb;
      opt.step();
      rw.step(gw, 0.05, 0.1, scale_parameter);
      rb.step(gb, 0.05, 0.1, scale_parameter);
    }
    CHECK(at::allclose(params[0].detach().to(at::kDouble), rw.x, 1e-5, 1e-6));
    CHECK(at::allclose(params[1].detach().to(at::kDouble), rb.x, 1e-5, 1e-6));
    // The parameters did move (by more than the tolerance).
    CHECK((params[0].detach() - w).abs().max().item<double>() > 1e-3);
  }
}

TEST_CASE("adafactor: a matrix keeps rows + columns floats, a vector its own size",
          "[unit][optim]") {
  std::vector<at::Tensor> params = {at::randn({512, 384}).requires_grad_(true),
                                    at::randn({384}).requires_grad_(true)};
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  Adafactor opt(params, AdafactorOptions(1e-2));
  opt.step();
  auto state_bytes = [&](const at::Tensor& p) {
    int64_t bytes = 0;
    for (const auto& [kind, t] : param_state_tensors(opt, p)) {
      if (kind != "step") bytes += static_cast<int64_t>(t.nbytes());
    }
    return bytes;
  };
  CHECK(state_bytes(params[0]) == 4 * (512 + 384));
  CHECK(state_bytes(params[1]) == 4 * 384);
  CHECK(param_state_tensors(opt, params[0]).at("exp_avg_sq_row").sizes() == at::IntArrayRef{512});
  CHECK(param_state_tensors(opt, params[0]).at("exp_avg_sq_col").sizes() == at::IntArrayRef{384});
}

namespace {

template <class Optimizer, class Options>
void check_resume_bit_for_bit(const Options& options) {
  at::manual_seed(9);
  const std::vector<at::Tensor> init = {at::randn({40, 30}), at::randn({30}), at::randn({700})};
  std::vector<std::vector<at::Tensor>> grads;
  for (int s = 0; s < 6; ++s) {
    std::vector<at::Tensor> g;
    for (const auto& p : init) g.push_back(at::randn_like(p));
    grads.push_back(std::move(g));
  }
  auto fresh = [&] {
    std::vector<at::Tensor> ps;
    for (const auto& p : init) ps.push_back(p.clone().requires_grad_(true));
    return ps;
  };
  auto run = [&](Optimizer& opt, std::vector<at::Tensor>& ps, int from, int to) {
    for (int s = from; s < to; ++s) {
      for (size_t i = 0; i < ps.size(); ++i) ps[i].mutable_grad() = grads[s][i].clone();
      opt.step();
    }
  };
  auto straight = fresh();
  Optimizer a(straight, options);
  run(a, straight, 0, 6);

  auto first = fresh();
  Optimizer b(first, options);
  run(b, first, 0, 3);
  // Through bytes, as a checkpoint's optimizer.pt holds them.
  io::NamedTensors saved;
  for (size_t i = 0; i < first.size(); ++i) {
    for (const auto& [kind, t] : param_state_tensors(b, first[i])) {
      saved.emplace_back(std::to_string(i) + "/" + kind, t);
    }
  }
  const io::NamedTensors loaded = io::load_tensors(io::save_tensors(saved), "optimizer state");
  auto resumed = fresh();
  for (size_t i = 0; i < resumed.size(); ++i) resumed[i].detach().copy_(first[i].detach());
  Optimizer c(resumed, options);
  for (size_t i = 0; i < resumed.size(); ++i) {
    std::map<std::string, at::Tensor> kinds;
    for (const auto& [key, t] : loaded) {
      if (key.rfind(std::to_string(i) + "/", 0) == 0) kinds[key.substr(key.find('/') + 1)] = t;
    }
    set_param_state(c, resumed[i], kinds);
  }
  run(c, resumed, 3, 6);
  for (size_t i = 0; i < init.size(); ++i) {
    INFO("parameter " << i);
    CHECK(at::equal(resumed[i], straight[i]));
    const auto sa = param_state_tensors(a, straight[i]), sc = param_state_tensors(c, resumed[i]);
    REQUIRE(sa.size() == sc.size());
    for (const auto& [kind, t] : sa) {
      INFO(kind);
      CHECK(t.scalar_type() == sc.at(kind).scalar_type());
      CHECK(at::equal(t, sc.at(kind)));
    }
  }
}

}  // namespace

TEST_CASE("adamw8bit and adafactor: saved state resumes bit for bit", "[unit][optim]") {
  SECTION("adamw8bit") {
    check_resume_bit_for_bit<AdamW8bit>(q_options(256));
    // What is saved is the uint8 codes and the fp32 block maxima.
    std::vector<at::Tensor> ps = {at::randn({700}).requires_grad_(true)};
    ps[0].mutable_grad() = at::randn({700});
    AdamW8bit opt(ps, q_options(256));
    opt.step();
    const auto kinds = param_state_tensors(opt, ps[0]);
    CHECK(kinds.at("exp_avg_code").scalar_type() == at::kByte);
    CHECK(kinds.at("exp_avg_sq_code").scalar_type() == at::kByte);
    CHECK(kinds.at("exp_avg_absmax").numel() == 3);
    // Another block size cannot take it.
    std::vector<at::Tensor> other = {at::randn({700}).requires_grad_(true)};
    AdamW8bit wrong(other, q_options(2048));
    CHECK_THROWS_WITH(set_param_state(wrong, other[0], kinds),
                      Catch::Contains("'exp_avg_absmax' has 3 elements, the optimizer expects 1"));
  }
  SECTION("adafactor") {
    check_resume_bit_for_bit<Adafactor>(AdafactorOptions(1e-2).weight_decay(0.1));
  }
  SECTION("adafactor with a first moment") {
    check_resume_bit_for_bit<Adafactor>(AdafactorOptions(1e-2).weight_decay(0.1).beta1(0.9));
    std::vector<at::Tensor> ps = {at::randn({6, 5}).requires_grad_(true)};
    ps[0].mutable_grad() = at::randn({6, 5});
    Adafactor opt(ps, AdafactorOptions(1e-2).beta1(0.9));
    opt.step();
    CHECK(param_state_tensors(opt, ps[0]).at("exp_avg").sizes() == ps[0].sizes());
  }
}
