// LoRA's arithmetic and bookkeeping on a tiny Llama: the adapted layer computes
// W0 x + b + scale B A x with PEFT's initialisation, only the adapters train, the model's
// parameter names do not change, and every bad setting is one clear error.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <torch/utils.h>

#include <cmath>
#include <set>

#include "frugal/models/finetune.h"
#include "frugal/models/gpt.h"
#include "frugal/models/llama.h"
#include "frugal/models/lora.h"
#include "frugal/models/model.h"
#include "frugal/util/error.h"
#include "support/model_configs.h"

using namespace frugal;

namespace lora_test {

LlamaOptions tiny_llama() {
  return test::small_llama_options(2, 4, 2, 32, 48, 40, /*qkv_bias=*/true, /*tie_embeddings=*/false);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}


TEST_CASE("lora: the adapted layer computes W0 x + b + scale B A x", "[lora]") {
  at::manual_seed(3);
  auto model = std::make_shared<Llama>(tiny_llama());
  const at::Tensor x = at::randint(0, 40, {2, 8}, at::kLong);
  const at::Tensor before = model->forward(x).detach();
  LoraOptions o;
  o.rank = 4;
  o.alpha = 8;
  const auto adapted = apply_lora(*model, o);
  CHECK(adapted == std::vector<std::string>{"layers.0.self_attn.q_proj", "layers.0.self_attn.v_proj",
                                            "layers.1.self_attn.q_proj", "layers.1.self_attn.v_proj"});
  // B starts at zero: the model is unchanged.
  CHECK(at::equal(model->forward(x).detach(), before));
  // A as PEFT initialises it: uniform within 1/sqrt(in).
  auto& q = model->layers[0]->as<LlamaBlock>()->self_attn->q_proj;
  LoraDownImpl* down = lora_down_of(*q);
  REQUIRE(down != nullptr);
  CHECK(down->weight.sizes() == at::IntArrayRef({4, 32}));
  CHECK(down->weight.abs().max().item<double>() <= 1.0 / std::sqrt(32.0));
  CHECK(down->weight.abs().max().item<double>() > 0.5 / std::sqrt(32.0));
  CHECK(down->scale == 2.0);
  {
    torch::NoGradGuard no_grad;
    lora_up_of(*q)->weight.normal_();
  }
  const at::Tensor h = at::randn({3, 32});
  const at::Tensor expected = at::linear(h, q->weight, q->bias) +
                              2.0 * at::matmul(at::matmul(h, down->weight.t()),
                                               lora_up_of(*q)->weight.t());
  CHECK(at::allclose(linear(q, h), expected, 1e-6, 1e-6));
  // Names: the base keeps its own, the adapters sit under the layer.
  std::set<std::string> trainable;
  for (const auto& p : model->named_parameters()) {
    if (p.value().requires_grad()) trainable.insert(p.key());
  }
  CHECK(trainable.size() == 8);
  CHECK(trainable.count("layers.1.self_attn.v_proj.lora_A.weight") == 1);
  CHECK(trainable.count("layers.1.self_attn.v_proj.lora_B.weight") == 1);
  CHECK(model->named_parameters().contains("layers.1.self_attn.v_proj.weight"));
  CHECK_FALSE(model->named_parameters()["layers.1.self_attn.v_proj.bias"].requires_grad());
  // Merged: W0 + scale B A gives the adapted outputs with a plain linear layer.
  for (const auto& [name, w] : merged_lora_weights(*model)) {
    if (name != "layers.0.self_attn.q_proj.weight") continue;
    CHECK(at::allclose(at::linear(h, w, q->bias), expected, 1e-5, 1e-5));
  }
  const ParameterCounts counts = count_parameters(*model);
  CHECK(counts.trainable == 2 * (2 * 4 * 32 + 4 * 32 + 4 * 16));  // q: 32 -> 32, v: 32 -> 16
}

TEST_CASE("lora: rsLoRA's scale, all-linear and dropout", "[lora]") {
  LoraOptions o;
  o.rank = 16;
  o.alpha = 8;
  CHECK(o.scale() == 0.5);
  o.rslora = true;
  CHECK(o.scale() == 2.0);

  at::manual_seed(4);
  auto model = std::make_shared<Llama>(tiny_llama());
  o.targets = {"all-linear"};
  const auto adapted = apply_lora(*model, o);
  CHECK(adapted.size() == 14);  // 7 per block; the output head is left alone
  for (const auto& name : adapted) CHECK(name.find("lm_head") == std::string::npos);

  // Dropout acts on the adapter's input in training only.
  auto gpt = std::make_shared<Gpt>(GptOptions::sized(32, 16, 1, 2, 16));
  LoraOptions d;
  d.rank = 2;
  d.dropout = 0.5;
  d.targets = {"qkv"};
  apply_lora(*gpt, d);
  auto& qkv = gpt->blocks[0]->as<GptBlock>()->attn->qkv;
  {
    torch::NoGradGuard no_grad;
    lora_up_of(*qkv)->weight.fill_(1.0);
  }
  const at::Tensor h = at::randn({4, 16});
  gpt->eval();
  const at::Tensor a = linear(qkv, h), b = linear(qkv, h);
  CHECK(at::equal(a, b));
  gpt->train();
  CHECK_FALSE(at::equal(linear(qkv, h), linear(qkv, h)));
}

TEST_CASE("lora: bad settings are one-line errors", "[lora][bad_input]") {
  auto model = std::make_shared<Llama>(tiny_llama());
  LoraOptions o;
  o.rank = 0;
  CHECK(error_of([&] { apply_lora(*model, o, "model.lora"); }) ==
        "model.lora.rank: must be > 0, got 0");
  o.rank = 2;
  o.alpha = 0;
  CHECK(error_of([&] { apply_lora(*model, o, "model.lora"); }) ==
        "model.lora.alpha: must be > 0, got 0");
  o.alpha = 4;
  o.targets = {"q_proj", "qkv"};
  const std::string none = error_of([&] { apply_lora(*model, o, "model.lora"); });
  CHECK(none.rfind("model.lora.targets: 'qkv' matches no linear layer; the model's linear layers: "
                   "layers.0.self_attn.q_proj, layers.0.self_attn.k_proj",
                   0) == 0);
  CHECK(none.find("lm_head") != std::string::npos);
  CHECK(none.find('\n') == std::string::npos);
  // Nothing was changed by the refused call.
  CHECK(count_parameters(*model).frozen == 0);

  const std::string frozen = error_of([&] { freeze_parameters(*model, {"embed*", "nope.*"}, "model.freeze"); });
  CHECK(frozen.rfind("model.freeze: 'nope.*' matches no parameter; the model's parameters: "
                     "embed_tokens.weight, ",
                     0) == 0);

  ModelConfig cfg;
  cfg.type = "llama";
  cfg.freeze = {"*"};
  auto other = std::make_shared<Llama>(tiny_llama());
  CHECK(error_of([&] { apply_finetuning(*other, cfg); }) ==
        "model: nothing left to train: model.freeze and model.lora leave no trainable parameter");
}

TEST_CASE("lora: model.freeze freezes by wildcard, and the rest trains", "[lora]") {
  auto model = std::make_shared<Llama>(tiny_llama());
  ModelConfig cfg;
  cfg.type = "llama";
  cfg.freeze = {"embed_tokens.*", "layers.0.*"};
  apply_finetuning(*model, cfg);
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    const bool frozen = p.key().rfind("embed_tokens.", 0) == 0 || p.key().rfind("layers.0.", 0) == 0;
    CHECK(p.value().requires_grad() == !frozen);
  }
}

TEST_CASE("lora: an adapter the forward does not use is an error", "[lora][bad_input]") {
  // A user module that calls its torch::nn::Linear directly bypasses the adapter.
  struct Direct : torch::nn::Module {
    torch::nn::Linear fc{nullptr};
    Direct() { fc = register_module("fc", torch::nn::Linear(8, 8)); }
  };
  Direct m;
  LoraOptions o;
  o.rank = 2;
  o.targets = {"fc"};
  apply_lora(m, o);
  (void)m.fc(at::randn({2, 8}));
  CHECK(error_of([&] { check_lora_used(m); }) ==
        "LoRA: the adapter of 'fc' was not used in the forward: its module calls the layer "
        "directly; call frugal::linear(fc, x) instead (frugal/models/model.h)");
  (void)linear(m.fc, at::randn({2, 8}));
  CHECK_NOTHROW(check_lora_used(m));
}

}  // namespace lora_test
