#include "frugal/models/registry.h"

#include <algorithm>

#include "builtin_specs.h"
#include "frugal/config/named_registry.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

// model.type is not restricted to known names in config validation: a program registers its
// models before it loads a config, and the name is checked here, when the model is built.
NamedRegistry<ModelSpec>& registry() {
  static NamedRegistry<ModelSpec> r("model.type", "model",
                                    {
                                        {"gpt", models_detail::gpt_spec()},
                                        {"llama", models_detail::llama_spec()},
                                        {"mlp", models_detail::mlp_spec()},
                                        {"convnet", models_detail::convnet_spec()},
                                    },
                                    /*validated=*/false);
  return r;
}

}  // namespace

bool ModelSpec::reads_key(const std::string& key) const {
  return keys.empty() || key_rule(key) != nullptr;
}

const KeyRule* ModelSpec::key_rule(const std::string& key) const {
  for (const ModelKey& k : keys)
    if (k.name == key) return &k.rule;
  return nullptr;
}

bool ModelSpec::chunked_loss() const { return !keys.empty() && reads_key("loss_chunk_tokens"); }

void register_model(const std::string& type, ModelSpec spec) {
  if (type.empty() || !spec.build)
    throw std::invalid_argument("register_model: empty name or factory");
  registry().add(type, std::move(spec));
}

void register_model(const std::string& type, ModelFactory factory) {
  ModelSpec spec;
  spec.build = std::move(factory);
  // Nothing else is known: its forward may take position ids (Model::forward_batch).
  spec.position_ids = true;
  register_model(type, std::move(spec));
}

std::vector<std::string> registered_models() { return registry().names(); }

std::optional<ModelSpec> find_model_spec(const std::string& type) { return registry().find(type); }

std::optional<FoundPreset> find_model_preset(const std::string& name) {
  for (const std::string& type : registry().names()) {
    for (const ModelPreset& p : registry().get(type).presets) {
      if (p.name == name) return FoundPreset{type, p};
    }
  }
  return std::nullopt;
}

std::vector<std::string> model_preset_names(const std::string& type) {
  std::vector<std::string> names;
  for (const std::string& t : registry().names()) {
    if (!type.empty() && t != type) continue;
    for (const ModelPreset& p : registry().get(t).presets) names.push_back(p.name);
  }
  return names;
}

std::optional<FoundSpec> find_hf_model_type(const std::string& hf_model_type) {
  for (const std::string& type : registry().names()) {
    const ModelSpec& spec = registry().get(type);
    const auto& read = spec.hf.model_types;
    if (std::find(read.begin(), read.end(), hf_model_type) != read.end())
      return FoundSpec{type, spec};
  }
  return std::nullopt;
}

std::vector<std::string> hf_model_types() {
  std::vector<std::string> out;
  for (const std::string& type : registry().names()) {
    const auto& read = registry().get(type).hf.model_types;
    out.insert(out.end(), read.begin(), read.end());
  }
  return out;
}

std::shared_ptr<Model> make_model(const ModelConfig& cfg) {
  return registry().get(cfg.type).build(cfg);
}

}  // namespace frugal
