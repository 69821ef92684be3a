// QLoRA: the LoRA targets' frozen weights in NF4. A tiny Llama with quantized q/v/down
// projections
//   - computes exactly what the same model computes with those weights dequantized (fp32), and
//     trains its adapters the same for several steps;
//   - keeps no full-precision copy of a quantized weight (no parameter, nothing in the state);
//   - trains the same under ddp, zero2, zero3 (Gloo, world 1), checkpointing and offload, its
//     NF4 codes untouched.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/utils.h>

#include <map>

#include "frugal/distributed/communicator.h"
#include "frugal/engine/engine.h"
#include "frugal/models/finetune.h"
#include "frugal/models/llama.h"
#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/optim/optimizer.h"
#include "frugal/util/error.h"
#include "support/model_configs.h"

using namespace frugal;

namespace qlora_test {

// 128 x 128 and 128 x 256 weights: multiples of NF4's 16384 values.
std::shared_ptr<Llama> small_llama() {
  return std::make_shared<Llama>(test::small_llama_options(2, 4, 4, 128, 256, 48));
}

ModelConfig qlora_config() {
  ModelConfig m;
  m.type = "llama";
  m.lora.rank = 4;
  m.lora.alpha = 8;
  m.lora.targets = {"q_proj", "v_proj", "down_proj"};
  m.quantize_base.type = "nf4";
  return m;
}

Batch batch_for(int step) {
  at::manual_seed(500 + step);
  at::Tensor seq = at::randint(0, 48, {4, 17}, at::kLong);
  return Batch{seq.slice(1, 0, 16), seq.slice(1, 1, 17)};
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> adapters;
};

Run train(const std::shared_ptr<Llama>& model, const StrategyConfig& sc,
          const std::shared_ptr<dist::Communicator>& comm) {
  Engine engine(EngineOptions{sc, 0.0}, sc.sharding.mode == "none" ? nullptr : comm);
  OptimConfig oc;
  oc.lr = 1e-2;
  engine.setup(model, make_optimizer(oc, *model));
  Run r;
  for (int step = 0; step < 4; ++step) {
    r.losses.push_back(
        engine.step(batch_for(step), [&](const Batch& b) { return model->batch_loss_sum(b); }).loss);
  }
  FullParameters whole(engine.sharding());
  for (const auto& p : model->named_parameters()) {
    if (p.value().requires_grad()) r.adapters[p.key()] = p.value().detach().clone();
  }
  return r;
}

void check_close(const Run& a, const Run& b, double tol) {
  REQUIRE(a.adapters.size() == b.adapters.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    CHECK(std::abs(a.losses[i] - b.losses[i]) <= tol * std::abs(b.losses[i]));
  }
  for (const auto& [name, t] : a.adapters) {
    INFO(name);
    CHECK(at::allclose(t, b.adapters.at(name), tol, tol));
  }
}


TEST_CASE("qlora: an NF4 base computes and trains as its dequantized weights do",
          "[integration][lora][nf4]") {
  at::manual_seed(9);
  auto q = small_llama();
  at::manual_seed(9);
  auto ref = small_llama();
  // The reference holds the dequantized weights as ordinary frozen parameters.
  apply_finetuning(*q, qlora_config());
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, layer] : linear_layers(*q)) {
      const nf4::Nf4Weight* w = nf4_weight_of(*layer);
      if (!w) continue;
      CHECK_FALSE(layer->weight.defined());
      CHECK_FALSE(q->named_parameters().contains(name + ".weight"));
      ref->named_parameters()[name + ".weight"].copy_(nf4::dequantize(*w, at::kFloat));
    }
  }
  ModelConfig lora_only = qlora_config();
  lora_only.quantize_base.type = "none";
  // The same adapters in both: q's copied into ref's.
  apply_finetuning(*ref, lora_only);
  {
    torch::NoGradGuard no_grad;
    auto mine = ref->named_parameters();
    for (const auto& p : q->named_parameters()) {
      if (p.value().requires_grad()) mine[p.key()].copy_(p.value());
    }
  }
  CHECK(count_parameters(*q).trainable == count_parameters(*ref).trainable);
  // 3 quantized layers x 2 blocks: their weights are not parameters any more.
  CHECK(count_parameters(*ref).frozen - count_parameters(*q).frozen ==
        2 * (128 * 128 * 2 + 128 * 256));

  const Batch b = batch_for(0);
  CHECK(at::allclose(q->forward(b.x), ref->forward(b.x), 1e-6, 1e-6));
  StrategyConfig plain;
  const Run qr = train(q, plain, nullptr);
  const Run rr = train(ref, plain, nullptr);
  check_close(qr, rr, 1e-5);

  // Checkpoints and exports: no NF4 tensor, no frozen weight.
  Engine engine(EngineOptions{plain, 0.0}, nullptr);
  OptimConfig oc;
  engine.setup(q, make_optimizer(oc, *q));
  for (const auto& [name, t] : engine.state_dict().model) {
    INFO(name);
    CHECK((name.find(".lora_") != std::string::npos || name.find("rotary") != std::string::npos ||
           !q->named_parameters().contains(name)));
    CHECK(name.find("nf4") == std::string::npos);
  }
  // The merged weights: dequantized base plus scale B A.
  for (const auto& [name, w] : merged_lora_weights(*q)) {
    INFO(name);
    const std::string layer = name.substr(0, name.size() - 7);
    for (auto& [n, l] : linear_layers(*q)) {
      if (n != layer) continue;
      const at::Tensor expected = nf4::dequantize(*nf4_weight_of(*l), at::kFloat) +
                                  at::matmul(lora_up_of(*l)->weight, lora_down_of(*l)->weight) * 2.0;
      CHECK(at::allclose(w, expected, 1e-6, 1e-6));
    }
  }
}

TEST_CASE("qlora: the same under every sharding mode, checkpointing and offload",
          "[integration][lora][nf4]") {
  auto comm = dist::init_from_env(DistributedConfig{}, dist::RankInfo{});  // Gloo, rank 0 of 1
  auto fresh = [] {
    at::manual_seed(9);
    auto m = small_llama();
    apply_finetuning(*m, qlora_config());
    return m;
  };
  const auto first = fresh();
  std::vector<at::Tensor> codes;
  for (auto& [name, layer] : linear_layers(*first)) {
    if (const auto* w = nf4_weight_of(*layer)) codes.push_back(w->codes.clone());
  }
  const Run ref = train(first, StrategyConfig{}, nullptr);
  size_t i = 0;
  for (auto& [name, layer] : linear_layers(*first)) {
    if (const auto* w = nf4_weight_of(*layer)) CHECK(at::equal(w->codes, codes[i++]));
  }
  std::vector<std::pair<std::string, StrategyConfig>> settings;
  for (const char* mode : {"ddp", "zero2", "zero3"}) {
    StrategyConfig sc;
    sc.sharding.mode = mode;
    settings.emplace_back(mode, sc);
  }
  StrategyConfig full;
  full.checkpointing.policy = "full";
  settings.emplace_back("checkpointing full", full);
  StrategyConfig zero3_full = full;
  zero3_full.sharding.mode = "zero3";
  settings.emplace_back("zero3 + checkpointing full", zero3_full);
  StrategyConfig offload;
  offload.offload.optimizer = true;
  offload.offload.activations = true;
  settings.emplace_back("offload optimizer + activations", offload);
  for (const auto& [name, sc] : settings) {
    INFO(name);
    check_close(train(fresh(), sc, comm), ref, 1e-5);
  }
  // bf16 autocast: the NF4 layers compute in bf16 and track fp32.
  StrategyConfig bf16;
  bf16.precision = "bf16-mixed";
  const Run half = train(fresh(), bf16, nullptr);
  for (size_t s = 0; s < half.losses.size(); ++s) {
    CHECK(std::abs(half.losses[s] - ref.losses[s]) <= 0.03 * ref.losses[s]);
  }
}

TEST_CASE("qlora: a layer NF4 cannot hold is refused before anything changes",
          "[integration][lora][nf4][bad_input]") {
  // v_proj: 64 x 128 = 8192 values
  auto model = std::make_shared<Llama>(test::small_llama_options(1, 4, 2, 128, 256, 48));
  ModelConfig m = qlora_config();
  std::string message;
  try {
    apply_finetuning(*model, m);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message ==
        "model.lora.targets: layer 'layers.0.self_attn.v_proj' has a weight of shape [64, 128] "
        "(8192 elements), not a multiple of 16384 (NF4 blocks of 64 values, their scales in "
        "groups of 256 blocks): leave it out of model.quantize_base.modules");
  for (auto& [name, layer] : linear_layers(*model)) {
    CHECK(nf4_weight_of(*layer) == nullptr);
    CHECK(lora_down_of(*layer) == nullptr);
  }
}

}  // namespace qlora_test
