// From the merged tree to the typed Config: every section and key must be in the schema
// (schema.h, checked in shape.cpp), model.size fills its preset first, then each key present
// overwrites its field.
#include <fmt/format.h>

#include "frugal/config/load.h"
#include "internal.h"
#include "schema.h"

namespace frugal::config_detail {
namespace {

// The preset named by model.size; every field it fills is marked at the model.size key, so a
// later range error on (say) n_head points where the value came from.
void apply_preset(const Entry& size, ModelConfig& model, KeyMarks& marks) {
  decode(size, model.size);
  if (model.size.empty()) return;
  const ModelPreset* preset = find_model_preset(model.size);
  if (!preset) {
    const std::vector<std::string> names = model_preset_names();
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(size.loc, fmt::format("model.size: unknown preset '{}'{} (known: {})", model.size,
                               did_you_mean(model.size, names), list));
  }
  preset->fill(model);
  marks["model.size"] = size.loc;
  for (const char* key : preset->keys) marks[std::string("model.") + key] = size.loc;
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
  return config;
}

}  // namespace frugal::config_detail
