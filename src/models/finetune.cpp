#include "frugal/models/finetune.h"

#include <fmt/format.h>

#include "frugal/models/lora.h"
#include "frugal/models/quantized_base.h"
#include "frugal/util/error.h"

namespace frugal {

bool finetuning(const ModelConfig& cfg) {
  return cfg.lora.rank > 0 || !cfg.freeze.empty() || cfg.quantize_base.type != "none";
}

std::vector<std::string> lora_targets(const ModelConfig& cfg) {
  if (!cfg.lora.targets.empty()) return cfg.lora.targets;
  if (cfg.type == "llama") return {"q_proj", "v_proj"};  // PEFT's default for Llama models
  if (cfg.type == "gpt") return {"qkv"};                 // the attention's input projection
  throw Error(fmt::format("model.lora.targets: give the linear layers to adapt for model.type {}",
                          cfg.type));
}

QuantizedLayers quantized_layers(const ModelConfig& cfg) {
  if (cfg.quantize_base.type != "nf4") return {};
  if (!cfg.quantize_base.modules.empty()) {
    return {cfg.quantize_base.modules, "model.quantize_base.modules"};
  }
  return {lora_targets(cfg), "model.lora.targets"};
}

void apply_finetuning(torch::nn::Module& model, const ModelConfig& cfg) {
  // The base first (its loaded weights quantized; layers hf::load_weights_quantized stored as
  // NF4 already are left as they are), then the adapters on it.
  if (const QuantizedLayers q = quantized_layers(cfg); !q.targets.empty()) {
    quantize_linear_layers(model, q.targets, q.key);
  }
  if (cfg.lora.rank > 0) {
    LoraOptions o;
    o.rank = cfg.lora.rank;
    o.alpha = cfg.lora.alpha;
    o.dropout = cfg.lora.dropout;
    o.targets = lora_targets(cfg);
    o.rslora = cfg.lora.rslora;
    apply_lora(model, o, "model.lora");
  }
  if (!cfg.freeze.empty()) freeze_parameters(model, cfg.freeze, "model.freeze");
  if (count_parameters(model).trainable == 0) {
    throw Error("model: nothing left to train: model.freeze and model.lora leave no trainable "
                "parameter");
  }
}

int64_t store_frozen_linear_weights(torch::nn::Module& model, c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  int64_t saved = 0;
  for (auto& [name, layer] : linear_layers(model)) {
    at::Tensor& w = layer->weight;
    if (!w.defined() || w.requires_grad() || !w.is_floating_point() || w.scalar_type() == dtype)
      continue;
    const int64_t before = static_cast<int64_t>(w.nbytes());
    w.set_data(w.to(dtype));
    saved += before - static_cast<int64_t>(w.nbytes());
  }
  return saved;
}

bool frozen_weights_follow_autocast(const ModelConfig& cfg) {
  return cfg.frozen_dtype == "auto" && finetuning(cfg);
}

}  // namespace frugal
