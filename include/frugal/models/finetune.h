// A model's fine-tuning settings applied once it is built (and its weights loaded): adapters
// (model.lora) on their layers, parameters frozen by name (model.freeze). Trainer, export and
// planner build the same trainable set from the same keys through this one function.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

// Whether the model section asks for any of it.
bool finetuning(const ModelConfig& cfg);

// model.lora.targets, or the model type's default (llama: q_proj, v_proj; gpt: qkv).
std::vector<std::string> lora_targets(const ModelConfig& cfg);

// The linear layers model.quantize_base stores as NF4 (its modules, else the LoRA targets) and
// the setting that names them in errors; no targets when the base is not quantized.
struct QuantizedLayers {
  std::vector<std::string> targets;
  std::string key;
};
QuantizedLayers quantized_layers(const ModelConfig& cfg);

// Applies model.lora then model.freeze to `model`; a frugal::Error names the key when a
// setting matches nothing, or when nothing is left to train.
void apply_finetuning(torch::nn::Module& model, const ModelConfig& cfg);

// Stores the frozen weights of `model`'s linear layers (torch::nn::Linear, used through
// frugal::linear) in `dtype`: under autocast in that dtype every use of them is the same
// rounded copy, so the numbers do not change and the base takes half the bytes; outside
// autocast frugal::linear computes them in the input's dtype. Returns the bytes saved.
int64_t store_frozen_linear_weights(torch::nn::Module& model, c10::ScalarType dtype);
// Whether model.frozen_dtype asks for the frozen linear weights in autocast's dtype (auto,
// when fine-tuning): the caller stores them so under a precision that autocasts.
bool frozen_weights_follow_autocast(const ModelConfig& cfg);

}  // namespace frugal
