// A Hugging Face model folder's config.json as frugal's model settings (model.init_from, and
// the architecture `frugal export --format hf` writes back: hf/folder.h).
#pragma once

#include <filesystem>

#include "frugal/config/config.h"

namespace frugal::hf {

// config.json's architecture as the ModelConfig of the model type that reads its model_type
// (ModelSpec::hf; built in: llama reads llama, mistral and qwen2). What the type cannot express
// (for llama: a head_dim other than hidden / heads, MLP or output biases, another rope_type,
// sliding windows) is a frugal::Error naming the file and the key. Fields of `base` that
// config.json does not set are kept.
ModelConfig read_model_config(const std::filesystem::path& dir, ModelConfig base = {});

// The config.json transformers reads for a model of these settings, as its type's mapping
// writes it: LlamaForCausalLM (or Qwen2ForCausalLM with q/k/v biases) for llama,
// GPT2LMHeadModel for gpt. A type without one, or settings it cannot express (a gpt without
// biases), are a frugal::Error.
std::string model_config_json(const ModelConfig& model);

}  // namespace frugal::hf
