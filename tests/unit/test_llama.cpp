// The Llama model: every preset has the published parameter count (from the shapes alone: the
// 8B is not built), a built model has as many parameters as the formula says (tied or not,
// GQA, Qwen2's biases), and its blocks are units that checkpointing recomputes exactly.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/engine/engine.h"
#include "frugal/models/llama.h"
#include "frugal/models/registry.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

ModelConfig preset(const std::string& size) {
  return load_config_string("model: {type: llama, size: " + size + "}", "<llama test>").model;
}

int64_t numel_of(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("llama presets have the published parameter counts", "[unit][llama]") {
  // transformers' num_parameters() of each public checkpoint.
  const std::vector<std::pair<std::string, int64_t>> published = {
      {"smollm2-135m", 134515008},   {"smollm2-360m", 361821120},
      {"smollm2-1.7b", 1711376384},  {"llama-3.2-1b", 1235814400},
      {"llama-3.2-3b", 3212749824},  {"llama-3.1-8b", 8030261248},
      {"qwen2.5-0.5b", 494032768},
  };
  for (const auto& [name, count] : published) {
    INFO(name);
    CHECK(LlamaOptions::from(preset(name)).parameter_count() == count);
  }
  CHECK(model_preset_names("llama").size() == published.size());
  // The smallest is built, and counted parameter by parameter.
  CHECK(numel_of(*make_model(preset("smollm2-135m"))) == 134515008);
}

TEST_CASE("a built llama has the parameters the formula counts", "[unit][llama]") {
  for (const std::string extra : {"n_kv_head: 2", "n_kv_head: 2, tie_embeddings: false",
                                  "qkv_bias: true, n_kv_head: 1",
                                  "n_kv_head: 4, intermediate_size: 100"}) {
    INFO(extra);
    const ModelConfig m = load_config_string(
        "model: " + test::transformer_yaml("llama", 2, 4, 32, 16, 50, extra), "<llama test>").model;
    auto model = make_model(m);
    CHECK(numel_of(*model) == LlamaOptions::from(m).parameter_count());
    at::Tensor logits = model->forward(at::randint(0, 50, {2, 7}, at::kLong));
    CHECK(logits.sizes() == at::IntArrayRef{2, 7, 50});
  }
  // Names as transformers' (without "model."): loading a Hugging Face folder maps by name.
  auto model = make_model(load_config_string(
      "model: " + test::transformer_yaml("llama", 1, 2, 16, 128, 50, "tie_embeddings: false"),
      "<llama test>").model);
  std::vector<std::string> names;
  for (const auto& p : model->named_parameters()) names.push_back(p.key());
  CHECK(names == std::vector<std::string>{
                     "embed_tokens.weight", "layers.0.input_layernorm.weight",
                     "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight",
                     "layers.0.self_attn.v_proj.weight", "layers.0.self_attn.o_proj.weight",
                     "layers.0.post_attention_layernorm.weight", "layers.0.mlp.gate_proj.weight",
                     "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight", "norm.weight",
                     "lm_head.weight"});
}

TEST_CASE("llama's sizes are checked with the key named", "[unit][llama][bad_input]") {
  auto error_of = [](const std::string& yaml) {
    try {
      load_config_string(yaml, "cfg.yaml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("model: {type: llama, n_head: 4, n_kv_head: 3}"),
             Catch::Contains("model.n_kv_head") && Catch::Contains("must divide model.n_head"));
  CHECK_THAT(error_of("model: {type: gpt, size: smollm2-135m}"),
             Catch::Contains("model.size") && Catch::Contains("is a llama size"));
  CHECK_THAT(error_of("model: {type: llama, rope_scaling: yarn}"),
             Catch::Contains("model.rope_scaling"));
}

TEST_CASE("llama blocks are units: full and selective checkpointing give the same gradients", "[unit][llama]") {
  auto grads = [](const std::string& policy, std::vector<std::string> targets = {}) {
    at::manual_seed(2);
    auto model = make_model(load_config_string(
        "model: " + test::transformer_yaml("llama", 3, 4, 32, 16, 40, "n_kv_head: 2"),
        "<llama test>").model);
    StrategyConfig sc;
    sc.checkpointing.policy = policy;
    sc.checkpointing.targets = targets;
    Engine engine(EngineOptions{sc, 0.0});
    OptimConfig oc;
    oc.type = "sgd";
    oc.lr = 0.0;  // gradients only
    engine.setup(model, make_optimizer(oc, *model));
    Batch b{at::randint(0, 40, {2, 16}, at::kLong), at::randint(0, 40, {2, 16}, at::kLong)};
    engine.forward_backward(b, [&](const Batch& mb) { return model->loss_sum(model->forward(mb.x), mb.y); });
    std::vector<at::Tensor> out;
    for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
    engine.optimizer_step();
    return out;
  };
  const auto plain = grads("none");
  for (const auto& recomputed : {grads("full"), grads("selective", {"self_attn", "mlp"})}) {
    REQUIRE(plain.size() == recomputed.size());
    for (size_t i = 0; i < plain.size(); ++i) CHECK(at::equal(plain[i], recomputed[i]));
  }
}

TEST_CASE("llama attention: ATen's SDPA and frugal's CPU kernel agree, masked or not",
          "[unit][llama]") {
  // model.kernels: aten is the path CUDA takes: the causal case must reach SDPA with no mask.
  auto logits = [](const std::string& kernels, bool with_positions) {
    at::manual_seed(4);
    auto model = make_model(load_config_string(
        "model: " +
            test::transformer_yaml("llama", 2, 4, 32, 16, 40, "n_kv_head: 2, kernels: " + kernels),
        "<llama test>").model);
    at::manual_seed(5);
    Batch b{at::randint(0, 40, {2, 16}, at::kLong), at::randint(0, 40, {2, 16}, at::kLong)};
    if (with_positions) b.position_ids = at::arange(16, at::kLong).repeat({2, 1});
    return model->forward_batch(b);
  };
  const at::Tensor frugal_kernel = logits("frugal", false);
  const at::Tensor aten = logits("aten", false);
  // Positions 0..T-1 given explicitly: the masked SDPA path, the same numbers.
  const at::Tensor masked = logits("auto", true);
  CHECK((aten - frugal_kernel).abs().max().item<double>() < 1e-5);
  CHECK((masked - frugal_kernel).abs().max().item<double>() < 1e-5);
}

TEST_CASE("rotary tables: one pair per dtype shared while held, not kept by the cache",
          "[unit][llama]") {
  RopeOptions o;
  o.head_dim = 8;
  RotaryEmbedding rope(o);
  auto [cos, sin] = rope.cos_sin(16, at::kCPU, at::kBFloat16);
  auto [cos_again, sin_again] = rope.cos_sin(16, at::kCPU, at::kBFloat16);
  // Every layer's rotation reads the same tensors (one saved copy for backward, not one each).
  CHECK(cos.is_same(cos_again));
  CHECK(sin.is_same(sin_again));
  CHECK(cos.scalar_type() == at::kBFloat16);
  // The float32 pair is its own, and the bf16 one is it rounded.
  auto [cos32, sin32] = rope.cos_sin(16, at::kCPU);
  CHECK(cos32.scalar_type() == at::kFloat);
  CHECK(at::equal(cos32.to(at::kBFloat16), cos));
  CHECK(at::equal(sin32.to(at::kBFloat16), sin));
  // Held by the two handles here and nothing else: the cache's reference is weak, so the
  // tables go with the last step's graph instead of staying between steps.
  CHECK(cos.use_count() == 2);
  CHECK(cos32.use_count() == 1);
  const at::Tensor values = cos32.clone();
  cos32.reset();
  sin32.reset();
  auto [cos32_new, sin32_new] = rope.cos_sin(16, at::kCPU);
  CHECK(at::equal(cos32_new, values));
}
