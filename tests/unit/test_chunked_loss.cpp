// Chunked output projection + cross-entropy (models/chunked_loss.h, model.loss_chunk_tokens):
// the loss and every gradient equal the unchunked linear + cross_entropy (fp32, 1e-5) for
// any chunk size, with ignored targets, through the GPT and the Llama; under bf16 autocast
// they stay within bf16's rounding of the unchunked autocast run; and the whole logits never
// exist: the peak of the extra memory a loss needs drops from the logits (and their gradient)
// to one chunk's.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <iostream>

#include "frugal/data/batch.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/models/chunked_loss.h"
#include "frugal/models/registry.h"
#include "frugal/strategy/autocast.h"
#include "frugal/util/error.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

Batch lm_batch(int64_t B, int64_t T, int64_t vocab) {
  at::manual_seed(11);
  Batch b{at::randint(0, vocab, {B, T}, at::kLong), at::randint(0, vocab, {B, T}, at::kLong)};
  b.y.masked_fill_(at::rand({B, T}) < 0.33, kIgnoreIndex);
  return b;
}

}  // namespace

TEST_CASE("chunked linear cross-entropy equals linear + cross_entropy for any chunk",
          "[unit][models][chunked_loss]") {
  at::manual_seed(3);
  const int64_t N = 50, C = 16, V = 97;
  at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  targets.masked_fill_(at::rand({N}) < 0.33, kIgnoreIndex);
  const at::Tensor h0 = at::randn({N, C}), w0 = at::randn({V, C}) * 0.3;
  at::Tensor h = h0.clone().requires_grad_(), w = w0.clone().requires_grad_();
  at::Tensor want = at::cross_entropy_loss(at::linear(h, w), targets, {}, at::Reduction::Sum,
                                           kIgnoreIndex);
  want.backward();
  for (int64_t chunk : {1, 7, 50, 64}) {
    INFO("chunk " << chunk);
    at::Tensor hc = h0.clone().requires_grad_(), wc = w0.clone().requires_grad_();
    at::Tensor got = chunked_linear_cross_entropy(hc, wc, targets, chunk);
    got.backward();
    CHECK(std::abs(got.item<double>() - want.item<double>()) < 1e-5 * std::abs(want.item<double>()));
    CHECK(max_diff(hc.grad(), h.grad()) < 1e-5);
    CHECK(max_diff(wc.grad(), w.grad()) < 1e-5);
  }
  CHECK_THROWS_AS(chunked_linear_cross_entropy(h0, w0, targets, 0), Error);
}

TEST_CASE("model.loss_chunk_tokens: the GPT and the Llama give the same loss and gradients",
          "[unit][models][chunked_loss]") {
  for (const std::string type : {"gpt", "llama"}) {
    INFO(type);
    ModelConfig mc = test::transformer_config(type, 2, 2, 32, 16, 80);
    mc.tie_embeddings = type == "gpt";  // the Llama with its own lm_head
    const Batch b = lm_batch(3, 16, 80);
    at::manual_seed(5);
    auto plain = make_model(mc);
    mc.loss_chunk_tokens = 10;  // 48 tokens: 4 chunks of 10, 1 of 8
    at::manual_seed(5);
    auto chunked = make_model(mc);
    const at::Tensor want = plain->batch_loss_sum(b);
    want.backward();
    const at::Tensor got = chunked->batch_loss_sum(b);
    got.backward();
    CHECK(std::abs(got.item<double>() - want.item<double>()) < 1e-5 * std::abs(want.item<double>()));
    double worst = 0;
    auto a = plain->named_parameters(), c = chunked->named_parameters();
    for (const auto& p : a) worst = std::max(worst, max_diff(p.value().grad(), c[p.key()].grad()));
    CHECK(worst < 1e-5);

    // bf16 autocast: both compute the logits in bf16 and the softmax in fp32.
    plain->zero_grad();
    chunked->zero_grad();
    at::Tensor want16, got16;
    {
      AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
      want16 = plain->batch_loss_sum(b);
      got16 = chunked->batch_loss_sum(b);
    }
    want16.backward();
    got16.backward();
    CHECK(std::abs(got16.item<double>() - want16.item<double>()) < 1e-2 * std::abs(want16.item<double>()));
    double worst16 = 0, scale = 0;
    for (const auto& p : a) {
      worst16 = std::max(worst16, max_diff(p.value().grad(), c[p.key()].grad()));
      scale = std::max(scale, p.value().grad().abs().max().item<double>());
    }
    std::cout << type << ": fp32 loss diff " << std::abs(got.item<double>() - want.item<double>())
              << ", gradients " << worst << "; bf16 gradients " << worst16 << " of " << scale << "\n";
    CHECK(worst16 < 0.05 * scale);
  }
}

TEST_CASE("chunked cross-entropy never holds the whole logits", "[unit][models][chunked_loss]") {
  memory::install_cpu_tracking();
  at::manual_seed(4);
  const int64_t N = 256, C = 64, V = 32768, chunk = 32;
  const at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  const int64_t logits_bytes = N * V * 4;  // 32 MiB
  auto peak_of = [&](bool chunked) {
    at::Tensor h = at::randn({N, C}).requires_grad_(), w = (at::randn({V, C}) * 0.1).requires_grad_();
    w.mutable_grad() = at::zeros_like(w);  // the weight's gradient is there either way
    const int64_t base = memory::cpu_counters().current_bytes;
    memory::reset_cpu_peak();
    at::Tensor loss = chunked ? chunked_linear_cross_entropy(h, w, targets, chunk)
                              : at::cross_entropy_loss(at::linear(h, w), targets, {},
                                                       at::Reduction::Sum, kIgnoreIndex);
    loss.backward();
    return memory::cpu_counters().peak_bytes - base;
  };
  const int64_t unchunked = peak_of(false), chunked = peak_of(true);
  std::cout << "extra peak of the loss: unchunked " << unchunked / 1048576.0 << " MiB, chunked "
            << chunked / 1048576.0 << " MiB (logits " << logits_bytes / 1048576.0 << " MiB)\n";
  CHECK(unchunked >= 2 * logits_bytes);  // the logits and their log-softmax at least
  // One chunk's logits and their gradient, the fp32 weight-gradient accumulator (V x C), the
  // gradient of the hidden states: nothing of the size of the logits.
  CHECK(chunked <= 3 * chunk * V * 4 + 2 * V * C * 4 + 4 * N * C * 4);
}

TEST_CASE("chunked cross-entropy with a frozen weight computes no weight gradient",
          "[unit][models][chunked_loss]") {
  // A fine-tuned model's tied embedding is frozen: the loss's backward must not build a (V, C)
  // gradient for it, nor run its products.
  memory::install_cpu_tracking();
  at::manual_seed(5);
  const int64_t N = 64, C = 64, V = 32768, chunk = 16;
  const at::Tensor targets = at::randint(0, V, {N}, at::kLong);
  const at::Tensor h0 = at::randn({N, C}), w = at::randn({V, C}) * 0.1;  // no requires_grad
  at::Tensor h = h0.clone().requires_grad_();
  const int64_t base = memory::cpu_counters().current_bytes;
  memory::reset_cpu_peak();
  chunked_linear_cross_entropy(h, w, targets, chunk).backward();
  const int64_t extra = memory::cpu_counters().peak_bytes - base;
  CHECK(extra < V * C * 4);  // less than the fp32 weight gradient alone
  CHECK_FALSE(w.grad().defined());
  at::Tensor hr = h0.clone().requires_grad_();
  at::cross_entropy_loss(at::linear(hr, w), targets, {}, at::Reduction::Sum, kIgnoreIndex).backward();
  CHECK(max_diff(h.grad(), hr.grad()) < 1e-5);
}
