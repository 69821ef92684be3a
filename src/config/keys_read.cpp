// Which keys a run of a config reads: each built-in model type reads its own sizes and no
// other type's, each data type its own source keys. The resolved config (config show,
// config.resolved.yaml) leaves the others out, so that it shows what the run used.
#include <algorithm>
#include <string_view>

#include "internal.h"

namespace frugal::config_detail {
namespace {

using Keys = std::initializer_list<std::string_view>;

bool listed(Keys keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool model_key_read(const ModelConfig& m, std::string_view key) {
  const std::string_view type = m.type;
  if (key == "type") return true;
  // Fine-tuning's keys show (and are hashed) when used.
  if (key == "freeze") return !m.freeze.empty();
  if (key == "init_adapter") return !m.init_adapter.empty();
  if (type == "gpt") {
    return listed({"size", "vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout",
                   "bias", "kernels", "loss_chunk_tokens"},
                  key);
  }
  if (type == "llama") {
    return listed({"size", "vocab_size", "block_size", "n_layer", "n_head", "n_embd", "kernels",
                   "loss_chunk_tokens", "init_from", "n_kv_head", "intermediate_size", "rope_theta", "rope_scaling", "rope_factor",
                   "rope_low_freq_factor", "rope_high_freq_factor",
                   "rope_original_max_position", "rms_norm_eps", "tie_embeddings", "qkv_bias"},
                  key);
  }
  if (type == "mlp") return listed({"in_features", "hidden", "out_features"}, key);
  if (type == "convnet") {
    return listed({"in_channels", "image_size", "channels", "num_classes"}, key);
  }
  return true;  // a model registered by the user may read any of them
}

bool data_key_read(std::string_view type, std::string_view key) {
  if (key == "path" || key == "val_path") return type != "synthetic";
  if (key == "labels_path") return type == "idx";
  if (key == "token_format" || key == "eot_token") return type == "tokens";
  if (key == "synthetic_samples") return type == "synthetic";
  if (key == "allow_tokenizer_mismatch") return type == "tokens" || type == "text";
  if (key == "chat_format" || key == "tokenizer" || key == "train_on") return type == "chat";
  if (key == "packing" || key == "truncate" || key == "max_tokens_per_batch" || key == "no_target")
    return type == "chat" || type == "tokenized";
  return true;
}

}  // namespace

bool key_is_read(const Config& config, std::string_view section, std::string_view key) {
  if (section == "model") return model_key_read(config.model, key);
  if (section == "model.lora") return config.model.lora.rank > 0;
  if (section == "model.quantize_base") return config.model.quantize_base.type != "none";
  if (section == "data") return data_key_read(config.data.type, key);
  return true;
}

}  // namespace frugal::config_detail
