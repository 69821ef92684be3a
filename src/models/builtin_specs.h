// The built-in model types' specs (frugal/models/model_spec.h), one file each; registry.cpp
// registers them under their names.
#pragma once

#include "frugal/models/model_spec.h"

namespace frugal::models_detail {

ModelSpec gpt_spec();
ModelSpec llama_spec();
ModelSpec mlp_spec();
ModelSpec convnet_spec();

// What the two transformers share: their size keys, and the checks on them (sizes >= 1, heads
// dividing the width, the kernels, a context that holds data.seq_len).
std::vector<std::string> transformer_keys();
void check_transformer(const ModelConfig& m, const DataConfig& data, const ConfigCheck& c);

}  // namespace frugal::models_detail
