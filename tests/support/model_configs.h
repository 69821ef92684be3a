// Small model configs for tests, written once: a transformer's shapes in one call.
#pragma once

#include <string>

#include "frugal/config/config.h"

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

}  // namespace frugal::test
