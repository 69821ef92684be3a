#include <fmt/format.h>

#include "builtin_specs.h"

namespace frugal::models_detail {

std::vector<std::string> transformer_keys() {
  return {"size",   "vocab_size", "block_size", "n_layer",
          "n_head", "n_embd",     "kernels",    "loss_chunk_tokens"};
}

void check_transformer(const ModelConfig& m, const DataConfig& data, const ConfigCheck& c) {
  c.at_least<int64_t>(m.vocab_size, 1, "model.vocab_size");
  c.at_least<int64_t>(m.block_size, 1, "model.block_size");
  c.at_least<int64_t>(m.n_layer, 1, "model.n_layer");
  c.at_least<int64_t>(m.n_head, 1, "model.n_head");
  c.at_least<int64_t>(m.n_embd, 1, "model.n_embd");
  c.require(m.n_embd % m.n_head == 0, "model.n_embd",
            fmt::format("must be a multiple of model.n_head ({} is not a multiple of {})", m.n_embd,
                        m.n_head),
            "model.n_head");
  c.one_of(m.kernels, {"auto", "aten", "frugal"}, "model.kernels");
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
