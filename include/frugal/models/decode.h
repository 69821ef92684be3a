// Text generation with a key/value cache (kv_cache.h): the prompt runs through the model once,
// then each new token alone. Greedy (the arg max, transformers' do_sample=False) or sampling
// with a temperature, top-k and top-p (nucleus) from a seeded generator; stops at any of the
// stop tokens (the end-of-text ids). What `frugal generate` runs; embedding code can call it
// on any Model that is a CachedDecoder (the GPT and the Llama family).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "frugal/models/model.h"

namespace frugal {

struct DecodeOptions {
  int64_t max_new_tokens = 256;
  double temperature = 0.0;  // 0 = greedy; > 0 samples from softmax(logits / temperature)
  int64_t top_k = 0;         // sample among the k most likely tokens only; 0 = all
  double top_p = 1.0;        // ... and among the fewest whose probabilities reach p; 1 = all
  uint64_t seed = 0;         // the sampling generator's (on the CPU, whatever the device)
  std::vector<int64_t> stop_tokens;  // decoding ends once one is produced (it is kept)
};

struct DecodeResult {
  std::vector<int64_t> tokens;  // the new tokens, a stop token last when `stopped`
  bool stopped = false;
  double prompt_seconds = 0.0;  // the prompt's pass, which also gives the first new token
  double decode_seconds = 0.0;  // the tokens after the first
};

// `model` must be a CachedDecoder (else a frugal::Error naming what it is); it runs in eval
// mode without autograd on the device of its parameters, the cache in their dtype. The
// prompt is at least one token and, with the new tokens, fits the model's context (an error
// otherwise; max_new_tokens is not cut silently). `on_token` sees each new token as it is made
// (streamed output).
DecodeResult decode(Model& model, const std::vector<int64_t>& prompt, const DecodeOptions& options,
                    const std::function<void(int64_t)>& on_token = {});

// logits (..., vocab) with every token outside the top_k most likely (top_k > 0) and outside
// the smallest set whose probabilities sum to at least top_p (top_p < 1) set to -inf; the
// most likely token always stays.
at::Tensor restrict_logits(at::Tensor logits, int64_t top_k, double top_p);

}  // namespace frugal
