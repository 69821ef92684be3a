#include <fmt/format.h>

#include "builtin_specs.h"

namespace frugal::models_detail {

std::vector<ModelKey> transformer_keys() {
  const KeyRule size = KeyRule::at_least(1);
  return {"size",
          {"vocab_size", size},
          {"block_size", size},
          {"n_layer", size},
          {"n_head", size},
          {"n_embd", size},
          {"kernels", KeyRule::one_of({"auto", "aten", "frugal"})},
          "loss_chunk_tokens"};
}

void check_transformer(const ModelConfig& m, const DataConfig& data, const ConfigCheck& c) {
  c.require(m.n_embd % m.n_head == 0, "model.n_embd",
            fmt::format("must be a multiple of model.n_head ({} is not a multiple of {})", m.n_embd,
                        m.n_head),
            "model.n_head");
  c.require(m.kernels != "frugal" || m.dropout == 0.0, "model.kernels",
            fmt::format("frugal's attention has no dropout (model.dropout is {}): use auto or "
                        "aten, or model.dropout: 0",
                        m.dropout),
            "model.dropout");
  c.require(data.seq_len <= m.block_size, "data.seq_len",
            fmt::format("must be <= model.block_size ({}), got {}", m.block_size, data.seq_len),
            "model.block_size");
}

}  // namespace frugal::models_detail
