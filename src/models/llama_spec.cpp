// model.type llama: the Llama family (Llama 2/3, Mistral, Qwen2 folders), rotary positions.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "builtin_specs.h"
#include "frugal/models/llama.h"

namespace frugal::models_detail {
namespace {

void check_llama(const ModelConfig& m, const DataConfig& data, const ConfigCheck& c) {
  check_transformer(m, data, c);
  const int64_t kv = m.n_kv_head == 0 ? m.n_head : m.n_kv_head;
  c.require(kv > 0 && m.n_head % kv == 0, "model.n_kv_head",
            fmt::format("must divide model.n_head ({} query heads do not share {} key/value "
                        "heads evenly)",
                        m.n_head, kv),
            "model.n_head");
  c.require((m.n_embd / std::max<int64_t>(1, m.n_head)) % 2 == 0, "model.n_embd",
            fmt::format("n_embd / n_head must be even for rotary embeddings (it is {})",
                        m.n_embd / std::max<int64_t>(1, m.n_head)),
            "model.n_head");
  if (m.rope_scaling == "llama3") {
    c.require(m.rope_factor >= 1.0, "model.rope_factor",
              fmt::format("must be >= 1, got {}", m.rope_factor));
    c.require(m.rope_high_freq_factor > m.rope_low_freq_factor && m.rope_low_freq_factor > 0,
              "model.rope_high_freq_factor",
              fmt::format("must be > model.rope_low_freq_factor > 0 (got {} and {})",
                          m.rope_high_freq_factor, m.rope_low_freq_factor),
              "model.rope_low_freq_factor");
    c.at_least<int64_t>(m.rope_original_max_position, 1, "model.rope_original_max_position");
  }
  c.require(m.dropout == 0.0, "model.dropout",
            fmt::format("llama has no dropout (got {}); use model.dropout: 0", m.dropout));
}

// The public models' shapes (their config.json), so that a run of that size matches the
// published parameter count (tests/unit/test_llama.cpp).
struct LlamaShape {
  int64_t vocab_size, n_embd, intermediate_size, n_layer, n_head, n_kv_head, block_size;
  double rope_theta;
  bool tie_embeddings;
  bool qkv_bias = false;
  double rms_norm_eps = 1e-5;
  double rope_factor = 0.0;  // > 0: llama3 frequency scaling with this factor
};

ModelPreset preset(const char* name, LlamaShape s) {
  return {
      name,
      [=](ModelConfig& m) {
        m.vocab_size = s.vocab_size;
        m.n_embd = s.n_embd;
        m.intermediate_size = s.intermediate_size;
        m.n_layer = s.n_layer;
        m.n_head = s.n_head;
        m.n_kv_head = s.n_kv_head;
        m.block_size = s.block_size;
        m.rope_theta = s.rope_theta;
        m.tie_embeddings = s.tie_embeddings;
        m.qkv_bias = s.qkv_bias;
        m.rms_norm_eps = s.rms_norm_eps;
        m.rope_scaling = s.rope_factor > 0 ? "llama3" : "none";
        if (s.rope_factor > 0) {
          m.rope_factor = s.rope_factor;
          m.rope_low_freq_factor = 1.0;
          m.rope_high_freq_factor = 4.0;
          m.rope_original_max_position = 8192;
        }
      },
      {"vocab_size", "n_embd", "intermediate_size", "n_layer", "n_head", "n_kv_head", "block_size",
       "rope_theta", "tie_embeddings", "qkv_bias", "rms_norm_eps", "rope_scaling", "rope_factor",
       "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_position"}};
}

}  // namespace

ModelSpec llama_spec() {
  ModelSpec s;
  s.build = [](const ModelConfig& c) { return std::make_shared<Llama>(LlamaOptions::from(c)); };
  s.keys = transformer_keys();
  s.keys.insert(s.keys.end(),
                {"init_from",
                 {"n_kv_head", KeyRule::at_least(0)},  // 0: as many as n_head
                 {"intermediate_size", KeyRule::at_least(0)},  // 0: from n_embd
                 {"rope_theta", KeyRule::greater_than(0)},
                 {"rope_scaling", KeyRule::one_of({"none", "llama3"})},
                 "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                 "rope_original_max_position",
                 {"rms_norm_eps", KeyRule::open_unit_interval()},
                 "tie_embeddings", "qkv_bias"});
  s.check = check_llama;
  s.inputs = ModelSpec::Inputs::tokens;
  s.hf = llama_hf();
  s.position_ids = true;
  s.presets = {
      //      name            vocab  hidden  inter  layers heads kv  context  theta  tied
      preset("smollm2-135m", {49152, 576, 1536, 30, 9, 3, 8192, 100000, true}),
      preset("smollm2-360m", {49152, 960, 2560, 32, 15, 5, 8192, 100000, true}),
      preset("smollm2-1.7b", {49152, 2048, 8192, 24, 32, 32, 8192, 130000, true}),
      preset("llama-3.2-1b",
             {128256, 2048, 8192, 16, 32, 8, 131072, 500000, true, false, 1e-5, 32}),
      preset("llama-3.2-3b",
             {128256, 3072, 8192, 28, 24, 8, 131072, 500000, true, false, 1e-5, 32}),
      preset("llama-3.1-8b",
             {128256, 4096, 14336, 32, 32, 8, 131072, 500000, false, false, 1e-5, 8}),
      preset("qwen2.5-0.5b", {151936, 896, 4864, 24, 14, 2, 32768, 1000000, true, true, 1e-6}),
  };
  return s;
}

}  // namespace frugal::models_detail
