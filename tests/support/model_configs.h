// Small model configs for tests, written once: a transformer's shapes in one call, as a
// ModelConfig, as YAML or as command-line overrides.
#pragma once

#include <string>

#include "frugal/config/config.h"
#include "frugal/models/llama.h"

namespace frugal::test {

// type "gpt" or "llama" (dropout 0, so runs compare exactly); the Llama's other keys keep
// their defaults (n_kv_head = n_head, tied embeddings) unless the caller sets them after.
inline ModelConfig transformer_config(const std::string& type, int64_t n_layer, int64_t n_head,
                                      int64_t n_embd, int64_t block_size, int64_t vocab_size) {
  ModelConfig mc;
  mc.type = type;
  mc.n_layer = n_layer;
  mc.n_head = n_head;
  mc.n_embd = n_embd;
  mc.block_size = block_size;
  mc.vocab_size = vocab_size;
  mc.dropout = 0.0;
  return mc;
}

// The same shapes as the value of a YAML `model:` key, "{type: gpt, n_layer: 2, ...}", for the
// configs tests write or load. `extra` ("dropout: 0.1", "intermediate_size: 32") adds keys
// inside the braces; dropout otherwise stays at ModelConfig's default, 0, as transformer_config
// sets it.
inline std::string transformer_yaml(const std::string& type, int64_t n_layer, int64_t n_head,
                                    int64_t n_embd, int64_t block_size, int64_t vocab_size,
                                    const std::string& extra = "") {
  return "{type: " + type + ", n_layer: " + std::to_string(n_layer) +
         ", n_head: " + std::to_string(n_head) + ", n_embd: " + std::to_string(n_embd) +
         ", block_size: " + std::to_string(block_size) +
         ", vocab_size: " + std::to_string(vocab_size) + (extra.empty() ? "" : ", " + extra) + "}";
}

// The same shapes as `frugal` overrides ("--set model.type=gpt --set model.n_layer=2 ..."), for
// runs configured on the command line. Only these keys: without a config file the built-in
// default's other model keys (its dropout 0.1, its size preset) stay as they are.
inline std::string transformer_sets(const std::string& type, int64_t n_layer, int64_t n_head,
                                    int64_t n_embd, int64_t block_size, int64_t vocab_size) {
  return "--set model.type=" + type + " --set model.n_layer=" + std::to_string(n_layer) +
         " --set model.n_head=" + std::to_string(n_head) +
         " --set model.n_embd=" + std::to_string(n_embd) +
         " --set model.block_size=" + std::to_string(block_size) +
         " --set model.vocab_size=" + std::to_string(vocab_size);
}

// A small Llama's options (context 16), from transformer_config's keys: grouped-query heads,
// the SwiGLU width and the other Llama keys as given.
inline LlamaOptions small_llama_options(int64_t n_layer, int64_t n_head, int64_t n_kv_head,
                                        int64_t hidden, int64_t intermediate, int64_t vocab_size,
                                        bool qkv_bias = false, bool tie_embeddings = true) {
  ModelConfig mc = transformer_config("llama", n_layer, n_head, hidden, 16, vocab_size);
  mc.n_kv_head = n_kv_head;
  mc.intermediate_size = intermediate;
  mc.qkv_bias = qkv_bias;
  mc.tie_embeddings = tie_embeddings;
  return LlamaOptions::from(mc);
}

}  // namespace frugal::test
