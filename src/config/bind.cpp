// From the merged tree to the typed Config: every section and key must be in the schema
// (schema.h, checked in shape.cpp), model.size fills its preset first, then each key present
// overwrites its field.
#include <fmt/format.h>

#include "frugal/config/hf_config.h"
#include "frugal/config/load.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

// The preset named by model.size; every field it fills is marked at the model.size key, so a
// later range error on (say) n_head points where the value came from.
void apply_preset(const Entry& size, ModelConfig& model, KeyMarks& marks) {
  decode(size, model.size);
  if (model.size.empty()) return;
  const std::optional<FoundPreset> found = find_model_preset(model.size);
  if (!found) {
    const std::vector<std::string> names = model_preset_names();
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(size.loc, fmt::format("model.size: unknown preset '{}'{} (known: {})", model.size,
                               did_you_mean(model.size, names), list));
  }
  found->preset.fill(model);
  marks["model.size"] = size.loc;
  for (const std::string& key : found->preset.keys) marks["model." + key] = size.loc;
}

// model.init_from: config.json decides the architecture. A key the YAML gives as well must
// agree with it (the error names both values); the others are filled from it and marked at
// model.init_from.
void apply_init_from(const Entry& root, ModelConfig& model, KeyMarks& marks) {
  const Entry* at = root.find_path("model.init_from");
  const Entry* size = root.find_path("model.size");
  if (size && !model.size.empty()) {
    fail(size->loc, "model.size: model.init_from sets the sizes from its config.json; give one "
                    "of the two");
  }
  const std::filesystem::path dir(model.init_from);
  ModelConfig from;
  try {
    from = hf::read_model_config(dir, model);
  } catch (const Error& e) {
    fail(at->loc, fmt::format("model.init_from: {}", e.what()));
  }
  const std::string file = (dir / "config.json").string();
  auto agree = [&](const char* key, const auto& mine, const auto& theirs) {
    const std::string path = std::string("model.") + key;
    marks[path] = at->loc;
    const Entry* given = root.find_path(path);
    if (given && !(mine == theirs)) {
      fail(given->loc, fmt::format("{}: {} here, {} in {} (model.init_from)", path, mine, theirs,
                                   file));
    }
  };
  agree("type", model.type, from.type);
  agree("vocab_size", model.vocab_size, from.vocab_size);
  agree("block_size", model.block_size, from.block_size);
  agree("n_layer", model.n_layer, from.n_layer);
  agree("n_head", model.n_head, from.n_head);
  agree("n_kv_head", model.n_kv_head, from.n_kv_head);
  agree("n_embd", model.n_embd, from.n_embd);
  agree("intermediate_size", model.intermediate_size, from.intermediate_size);
  agree("rope_theta", model.rope_theta, from.rope_theta);
  agree("rope_scaling", model.rope_scaling, from.rope_scaling);
  agree("rope_factor", model.rope_factor, from.rope_factor);
  agree("rope_low_freq_factor", model.rope_low_freq_factor, from.rope_low_freq_factor);
  agree("rope_high_freq_factor", model.rope_high_freq_factor, from.rope_high_freq_factor);
  agree("rope_original_max_position", model.rope_original_max_position,
        from.rope_original_max_position);
  agree("rms_norm_eps", model.rms_norm_eps, from.rms_norm_eps);
  agree("tie_embeddings", model.tie_embeddings, from.tie_embeddings);
  agree("qkv_bias", model.qkv_bias, from.qkv_bias);
  model = from;
}

}  // namespace

Config bind(const Entry& root, const std::string& source, KeyMarks& marks) {
  check_shape(root);
  Config config;
  config.source = source;
  if (const Entry* size = root.find_path("model.size")) apply_preset(*size, config.model, marks);
  // auto&&: a field is a member reference or a wrapper made for the call (Bytes).
  for_each_field(config, [&](const char* section, const char* key, auto&& field) {
    const Entry* entry = root.find_path(dotted(section, key));
    if (!entry) return;
    decode(*entry, field);
    marks[entry->path] = entry->loc;
    for (const Entry& child : entry->children) marks[child.path] = child.loc;  // model.options
    if (!entry->is_map && entry->value().IsSequence())  // list items, checked one by one
      for (size_t i = 0; i < entry->value().size(); ++i)
        marks[fmt::format("{}[{}]", entry->path, i)] = item_loc(*entry, i);
  });
  if (!config.model.init_from.empty()) apply_init_from(root, config.model, marks);
  return config;
}

}  // namespace frugal::config_detail
