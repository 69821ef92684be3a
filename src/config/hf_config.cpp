// config.json to and from frugal's model settings, through the model types' Hugging Face
// mappings (ModelSpec::hf): the file's model_type picks the type that reads it.
#include "frugal/config/hf_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;

namespace frugal::hf {

ModelConfig read_model_config(const fs::path& dir, ModelConfig m) {
  const fs::path file = dir / "config.json";
  if (!fs::exists(file)) throw Error(fmt::format("{}: no such file", file.string()));
  const nlohmann::json doc = json_input::parse_file(file, json_input::kConfigMaxBytes);
  const json_input::Node c(doc, file.string());
  c.object();
  const std::string type = c.string_or("model_type", "");
  const std::optional<FoundSpec> found = find_hf_model_type(type);
  if (!found || !found->spec.hf.read_config) {
    c.at("model_type")
        .fail(fmt::format("'{}' is not a model_type frugal reads ({})", type,
                          fmt::join(hf_model_types(), ", ")));
  }
  m.type = found->type;
  m.size.clear();
  found->spec.hf.read_config(c, type, m);
  return m;
}

std::string model_config_json(const ModelConfig& m) {
  const std::optional<ModelSpec> spec = find_model_spec(m.type);
  if (!spec || !spec->hf.write_config) {
    throw Error(
        fmt::format("export --format hf: model.type {} has no transformers "
                    "architecture",
                    m.type));
  }
  nlohmann::json c = nlohmann::json::parse(spec->hf.write_config(m));
  c["dtype"] = "float32";
  return c.dump(2);
}

}  // namespace frugal::hf
