// Hugging Face model folders, as `save_pretrained` writes them: config.json (the
// architecture) and the weights in model.safetensors, or sharded with
// model.safetensors.index.json. frugal's Llama names its parameters as transformers does
// without the leading "model." (models/llama.h), so the weights map by name.
#pragma once

#include <torch/nn/module.h>

#include <filesystem>

#include "frugal/config/config.h"
#include "frugal/io/named_tensors.h"

namespace frugal::hf {

// config.json's architecture as a llama ModelConfig (model_type llama, mistral or qwen2; the
// sizes, grouped-query heads, rotary base and scaling, RMSNorm epsilon, tied embeddings,
// Qwen2's q/k/v biases). What frugal's Llama cannot express (a head_dim other than
// hidden / heads, MLP or output biases, another rope_type, sliding windows) is a frugal::Error
// naming the file and the key. Fields of `base` that config.json does not set are kept.
ModelConfig read_model_config(const std::filesystem::path& dir, ModelConfig base = {});

// The weights by frugal's names ("model." stripped), from model.safetensors or every shard the
// index lists. A folder without either is a frugal::Error naming it.
io::NamedTensors read_weights(const std::filesystem::path& dir);

// Copies the folder's weights into `model`: every parameter must be there with its shape
// (converted to the parameter's dtype); a tied model ignores a saved lm_head.weight that
// equals the embedding. A missing or mis-shaped tensor, or one the model does not have, is a
// frugal::Error naming the folder and the tensor.
void load_weights(torch::nn::Module& model, const std::filesystem::path& dir);

}  // namespace frugal::hf
