// From the merged tree to the typed Config: every section and key must be in the schema
// (schema.h), model.size fills its preset first, then each key present overwrites its field.
#include <fmt/format.h>

#include <algorithm>

#include "frugal/config/load.h"
#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& [section, keys] : schema_keys()) names.push_back(section);
  return names;
}

void check_shape(const Entry& root) {
  for (const Entry& section : root.children) {
    const auto& schema = schema_keys();
    const auto known = std::find_if(schema.begin(), schema.end(),
                                    [&](const auto& s) { return s.first == section.key; });
    if (known == schema.end())
      fail(section.loc, fmt::format("unknown section '{}'{}", section.key,
                                    did_you_mean(section.key, section_names())));
    if (!section.is_map && !section.value().IsNull())
      fail(section.loc, fmt::format("section '{}' must be a map of keys, got {}", section.key,
                                    describe(section.value())));
    const std::vector<std::string>& keys = known->second;
    for (const Entry& key : section.children)
      if (std::find(keys.begin(), keys.end(), key.key) == keys.end())
        fail(key.loc, fmt::format("unknown key '{}'{}", key.path, did_you_mean(key.key, keys)));
  }
}

const Entry* find_key(const Entry& root, std::string_view section, std::string_view key) {
  const Entry* s = root.find(section);
  return s ? s->find(key) : nullptr;
}

// The preset named by model.size; every field it fills is marked at the model.size key, so a
// later range error on (say) n_head points where the value came from.
void apply_preset(const Entry& size, ModelConfig& model, KeyMarks& marks) {
  decode(size, model.size);
  if (model.size.empty()) return;
  const GptPreset* preset = find_gpt_preset(model.size);
  if (!preset) {
    const std::vector<std::string> names = gpt_preset_names();
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(size.loc, fmt::format("model.size: unknown preset '{}'{} (known: {})", model.size,
                               did_you_mean(model.size, names), list));
  }
  model.n_layer = preset->n_layer;
  model.n_head = preset->n_head;
  model.n_embd = preset->n_embd;
  model.block_size = preset->block_size;
  model.vocab_size = preset->vocab_size;
  for (const char* key : {"size", "n_layer", "n_head", "n_embd", "block_size", "vocab_size"})
    marks[std::string("model.") + key] = size.loc;
}

}  // namespace

Config bind(const Entry& root, const std::string& source, KeyMarks& marks) {
  check_shape(root);
  Config config;
  config.source = source;
  if (const Entry* size = find_key(root, "model", "size")) apply_preset(*size, config.model, marks);
  for_each_field(config, [&](const char* section, const char* key, auto& field) {
    const Entry* entry = find_key(root, section, key);
    if (!entry) return;
    decode(*entry, field);
    marks[entry->path] = entry->loc;
    for (const Entry& child : entry->children) marks[child.path] = child.loc;  // model.options
  });
  return config;
}

}  // namespace frugal::config_detail
