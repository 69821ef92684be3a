#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <catch2/catch.hpp>

#include <set>

#include "frugal/models/convnet.h"
#include "frugal/models/gpt.h"
#include "frugal/models/mlp.h"
#include "frugal/models/model.h"
#include "frugal/models/registry.h"
#include "frugal/strategy/autocast.h"
#include "frugal/util/error.h"

using namespace frugal;

namespace {

GptOptions small_gpt() { return GptOptions::sized(50, 16, 2, 2, 8); }

}  // namespace

TEST_CASE("GPT parameter names are the ones PyTorch would give", "[unit][models]") {
  Gpt gpt(small_gpt());
  std::vector<std::string> names;
  for (const auto& p : gpt.named_parameters()) names.push_back(p.key());
  const std::vector<std::string> expected = {
      "tok_emb.weight",          "pos_emb.weight",          "blocks.0.ln1.weight",
      "blocks.0.ln1.bias",       "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
      "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "blocks.0.ln2.weight",
      "blocks.0.ln2.bias",       "blocks.0.mlp.fc.weight",  "blocks.0.mlp.fc.bias",
      "blocks.0.mlp.proj.weight", "blocks.0.mlp.proj.bias"};
  for (size_t i = 0; i < expected.size(); ++i) CHECK(names[i] == expected[i]);
  CHECK(names.back() == "ln_f.bias");
  // Tied output projection: no separate lm_head parameter.
  for (const auto& n : names) CHECK(n.find("lm_head") == std::string::npos);
}

TEST_CASE("GPT parameter count follows the GPT-2 formula", "[unit][models]") {
  const GptOptions o = small_gpt();
  Gpt gpt(o);
  int64_t n = 0;
  for (const auto& p : gpt.parameters()) n += p.numel();
  const int64_t C = o.n_embd;
  const int64_t per_block = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C +
                            (C * 4 * C + 4 * C) + (4 * C * C + C);
  CHECK(n == o.vocab_size * C + o.block_size * C + o.n_layer * per_block + 2 * C);
}

TEST_CASE("GPT forward gives (B, T, vocab) logits and is causal", "[unit][models]") {
  at::manual_seed(0);
  Gpt gpt(small_gpt());
  gpt.eval();
  at::Tensor idx = at::randint(0, 50, {3, 10}, at::kLong);
  at::Tensor logits = gpt.forward(idx);
  CHECK(logits.sizes() == at::IntArrayRef({3, 10, 50}));
  // Changing the last token must not change earlier positions' logits.
  at::Tensor idx2 = idx.clone();
  idx2.select(1, 9).fill_(7);
  at::Tensor logits2 = gpt.forward(idx2);
  CHECK(at::equal(logits.slice(1, 0, 9), logits2.slice(1, 0, 9)));
  CHECK_THROWS_AS(gpt.forward(at::zeros({1, 17}, at::kLong)), Error);
}

TEST_CASE("GPT initial loss is close to ln(vocab)", "[unit][models]") {
  at::manual_seed(1);
  Gpt gpt(small_gpt());
  at::Tensor idx = at::randint(0, 50, {4, 16}, at::kLong);
  at::Tensor y = at::randint(0, 50, {4, 16}, at::kLong);
  const double mean = gpt.loss_sum(gpt.forward(idx), y).item<double>() / y.numel();
  CHECK(mean == Approx(std::log(50.0)).epsilon(0.05));
}

TEST_CASE("GPT generate extends the prompt deterministically", "[unit][models]") {
  at::manual_seed(2);
  Gpt gpt(small_gpt());
  at::Tensor prompt = at::tensor(std::vector<int64_t>{1, 2, 3}, at::kLong).unsqueeze(0);
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(5);
  auto g2 = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor a = gpt.generate(prompt, 20, 0.9, 10, g1);
  at::Tensor b = gpt.generate(prompt, 20, 0.9, 10, g2);
  CHECK(a.size(1) == 23);
  CHECK(at::equal(a, b));
  CHECK(at::equal(a.slice(1, 0, 3), prompt));
  CHECK(gpt.is_training());
}

TEST_CASE("MLP and ConvNet shapes and names", "[unit][models]") {
  Mlp mlp(6, {5, 4}, 3);
  CHECK(mlp.forward(at::randn({2, 6})).sizes() == at::IntArrayRef({2, 3}));
  std::set<std::string> names;
  for (const auto& p : mlp.named_parameters()) names.insert(p.key());
  CHECK(names == std::set<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                       "layers.1.bias", "head.weight", "head.bias"});
  ConvNet cnn(1, 28, {4, 8}, 10);
  CHECK(cnn.forward(at::randn({2, 1, 28, 28})).sizes() == at::IntArrayRef({2, 10}));
  CHECK(cnn.named_parameters().contains("convs.1.weight"));
  CHECK_THROWS_AS(ConvNet(1, 2, {4, 8, 8}, 10), Error);
}

TEST_CASE("frugal::linear equals the layer's forward as one fused op", "[unit][models]") {
  torch::nn::Linear with_bias(torch::nn::LinearOptions(6, 5));
  torch::nn::Linear no_bias(torch::nn::LinearOptions(6, 5).bias(false));
  const at::Tensor x = at::randn({2, 3, 6});
  for (auto* layer : {&with_bias, &no_bias}) {
    at::Tensor fused = linear(*layer, x);
    CHECK(at::allclose(fused, (*layer)->forward(x), 1e-6, 1e-6));
    // torch::nn::Linear::forward ends a 3-D input with an in-place `+= bias` (AddBackward0);
    // at::linear folds the bias into addmm. The GPT's step time depends on it.
    REQUIRE(fused.grad_fn());
    CHECK(fused.grad_fn()->name() != "AddBackward0");
  }
}

namespace {
class Affine : public Model {
 public:
  explicit Affine(int64_t n) { w = register_parameter("w", at::ones({n})); }
  at::Tensor forward(const at::Tensor& x) override { return x * w; }
  at::Tensor w;
};
}  // namespace

TEST_CASE("user models register by name", "[unit][models]") {
  register_model("affine-test", [](const ModelConfig& c) {
    return std::make_shared<Affine>(std::stoll(c.options.at("n")));
  });
  ModelConfig cfg;
  cfg.type = "affine-test";
  cfg.options["n"] = "7";
  auto m = make_model(cfg);
  CHECK(m->named_parameters()["w"].numel() == 7);
  cfg.type = "nope";
  try {
    make_model(cfg);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown model 'nope'") != std::string::npos);
    CHECK(std::string(e.what()).find("affine-test") != std::string::npos);
  }
}

TEST_CASE("GPT with frugal's CPU attention matches ATen's kernels, fp32 and bf16 autocast",
          "[unit][models][kernels]") {
  for (bool bf16 : {false, true}) {
    CAPTURE(bf16);
    std::vector<at::Tensor> grads[2];
    at::Tensor losses[2];
    for (int which = 0; which < 2; ++which) {
      at::manual_seed(11);
      GptOptions o = GptOptions::sized(64, 40, 2, 4, 32);
      o.kernels = which == 0 ? Kernels::Aten : Kernels::Frugal;
      Gpt gpt(o);
      at::Tensor idx = at::randint(64, {3, 40});
      at::Tensor logits;
      {
        AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16, bf16);
        logits = gpt.forward(idx);
      }
      losses[which] = at::cross_entropy_loss(logits.reshape({-1, 64}).to(at::kFloat),
                                             idx.roll(1, 1).reshape({-1}));
      losses[which].backward();
      for (const auto& p : gpt.parameters()) grads[which].push_back(p.grad());
    }
    const double tol = bf16 ? 2e-2 : 1e-5;
    CHECK(std::abs(losses[0].item<double>() - losses[1].item<double>()) < tol);
    for (size_t i = 0; i < grads[0].size(); ++i) {
      CAPTURE(i);
      const double scale = grads[0][i].abs().max().item<double>();
      CHECK((grads[0][i] - grads[1][i]).abs().max().item<double>() <= tol * scale + 1e-12);
    }
  }
}
