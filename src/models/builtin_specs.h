// The built-in model types' specs (frugal/models/model_spec.h), one file each; registry.cpp
// registers them under their names.
#pragma once

#include "frugal/models/model_spec.h"

namespace frugal::models_detail {

ModelSpec gpt_spec();
ModelSpec llama_spec();
ModelSpec mlp_spec();
ModelSpec convnet_spec();

// The transformers' Hugging Face mappings (llama_hf.cpp, gpt_hf.cpp).
HfMapping llama_hf();
HfMapping gpt_hf();

// What the two transformers share: their size keys with their ranges (sizes >= 1, the kernels),
// and the checks between them (heads dividing the width, a context that holds data.seq_len).
std::vector<ModelKey> transformer_keys();
void check_transformer(const ModelConfig& m, const DataConfig& data, const ConfigCheck& c);

}  // namespace frugal::models_detail
