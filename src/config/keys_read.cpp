// Which keys a run of a config reads: each model type the keys its spec lists (its sizes, no
// other type's), each data type its own source keys. The resolved config (config show,
// config.resolved.yaml) leaves the others out, so that it shows what the run used.
#include <algorithm>
#include <string_view>

#include "frugal/models/model_spec.h"
#include "internal.h"

namespace frugal::config_detail {
namespace {

using Keys = std::initializer_list<std::string_view>;

bool listed(Keys keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace

bool model_key_is_common(std::string_view key) {
  return key == "type" || key == "freeze" || key == "init_adapter" || key == "frozen_dtype";
}

namespace {

bool model_key_read(const ModelConfig& m, std::string_view key) {
  if (key == "type") return true;
  // Fine-tuning's keys show (and are hashed) when used.
  if (key == "freeze") return !m.freeze.empty();
  if (key == "init_adapter") return !m.init_adapter.empty();
  // (What frugal::finetuning(m) asks; models/finetune.h is not included in config.)
  if (key == "frozen_dtype") {
    return m.lora.rank > 0 || !m.freeze.empty() || m.quantize_base.type != "none";
  }
  // The type's own keys (frugal/models/model_spec.h); an unknown type's all of them.
  const std::optional<ModelSpec> spec = find_model_spec(m.type);
  return !spec || spec->reads_key(std::string(key));
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
