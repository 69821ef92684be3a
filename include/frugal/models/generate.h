// Autoregressive sampling from any causal language model (Model::forward: (B, T) tokens ->
// (B, T, vocab) logits): temperature, top-k, a context window, an optional stop token. No
// key/value cache: each new token runs the model over the window again, which is what a text
// sample at the end of training needs, not a serving path.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <optional>

#include "frugal/models/model.h"

namespace frugal {

struct SamplingOptions {
  int64_t new_tokens = 64;
  double temperature = 0.8;  // > 0
  int64_t top_k = 0;         // 0 = the full distribution; 1 = greedy
  int64_t context = 0;       // the most tokens the model sees (its block size); 0 = all
  std::optional<int64_t> stop_token;  // ends sampling once drawn (and is kept)
};

// idx (1, T0) int64 -> (1, T0 + n), n <= new_tokens. Runs in eval mode without gradients
// (the model's mode is put back); draws from `generator`.
at::Tensor sample_tokens(Model& model, at::Tensor idx, const SamplingOptions& options,
                         at::Generator generator);

}  // namespace frugal
