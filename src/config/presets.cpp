// Named model sizes for model.size, per model type. A preset only fills defaults: keys written
// explicitly (in any file of the extends chain, or with --set) win, whatever their order (see
// bind.cpp). The llama presets are the public models' shapes (their config.json), so that a
// run of that size matches the published parameter count (tests/unit/test_llama.cpp).
#include "frugal/config/load.h"
#include "internal.h"

namespace frugal::config_detail {
namespace {

ModelPreset gpt(const char* name, int64_t n_layer, int64_t n_head, int64_t n_embd,
                int64_t block_size, int64_t vocab_size) {
  return {name, "gpt",
          [=](ModelConfig& m) {
            m.n_layer = n_layer;
            m.n_head = n_head;
            m.n_embd = n_embd;
            m.block_size = block_size;
            m.vocab_size = vocab_size;
          },
          {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"}};
}

struct LlamaShape {
  int64_t vocab_size, n_embd, intermediate_size, n_layer, n_head, n_kv_head, block_size;
  double rope_theta;
  bool tie_embeddings;
  bool qkv_bias = false;
  double rms_norm_eps = 1e-5;
  double rope_factor = 0.0;  // > 0: llama3 frequency scaling with this factor
};

ModelPreset llama(const char* name, LlamaShape s) {
  return {name, "llama",
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
          {"vocab_size", "n_embd", "intermediate_size", "n_layer", "n_head", "n_kv_head",
           "block_size", "rope_theta", "tie_embeddings", "qkv_bias", "rms_norm_eps",
           "rope_scaling", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
           "rope_original_max_position"}};
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      //   name         n_layer n_head n_embd block_size vocab_size
      gpt("gpt-tiny", 2, 2, 32, 32, 256),
      gpt("gpt-mini", 4, 4, 128, 128, 256),
      gpt("gpt-small", 6, 6, 384, 256, 256),
      gpt("gpt2-124m", 12, 12, 768, 1024, 50304),   // GPT-2 small; vocab 50257 padded to 64s
      gpt("gpt2-350m", 24, 16, 1024, 1024, 50304),  // GPT-2 medium
      //     name            vocab  hidden  inter  layers heads kv  context  theta  tied
      llama("smollm2-135m", {49152, 576, 1536, 30, 9, 3, 8192, 100000, true}),
      llama("smollm2-360m", {49152, 960, 2560, 32, 15, 5, 8192, 100000, true}),
      llama("smollm2-1.7b", {49152, 2048, 8192, 24, 32, 32, 8192, 130000, true}),
      llama("llama-3.2-1b", {128256, 2048, 8192, 16, 32, 8, 131072, 500000, true, false, 1e-5, 32}),
      llama("llama-3.2-3b", {128256, 3072, 8192, 28, 24, 8, 131072, 500000, true, false, 1e-5, 32}),
      llama("llama-3.1-8b", {128256, 4096, 14336, 32, 32, 8, 131072, 500000, false, false, 1e-5, 8}),
      llama("qwen2.5-0.5b", {151936, 896, 4864, 24, 14, 2, 32768, 1000000, true, true, 1e-6}),
  };
  return presets;
}

const ModelPreset* find_model_preset(std::string_view name) {
  for (const ModelPreset& p : model_presets())
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace frugal::config_detail

namespace frugal {

std::vector<std::string> model_preset_names(const std::string& type) {
  std::vector<std::string> names;
  for (const auto& p : config_detail::model_presets()) {
    if (type.empty() || type == p.type) names.push_back(p.name);
  }
  return names;
}

std::vector<std::string> gpt_preset_names() { return model_preset_names("gpt"); }

}  // namespace frugal
