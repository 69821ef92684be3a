// The loading pipeline, in its fixed order: read (with extends) -> overrides -> bind (preset,
// types) -> validate. Each step is one function in its own file.
#include "frugal/config/load.h"

#include "internal.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

Config finish(config_detail::Entry root, const std::string& source,
              const std::vector<std::string>& overrides) {
  config_detail::apply_overrides(root, overrides);
  config_detail::KeyMarks marks;
  Config config = config_detail::bind(root, source, marks);
  config_detail::validate(config, &marks);
  return config;
}

}  // namespace

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return finish(config_detail::read_config_file(path), path, overrides);
}

Config load_config_string(const std::string& yaml_text, const std::string& source_name,
                          const std::vector<std::string>& overrides) {
  return finish(config_detail::read_config_text(yaml_text, source_name), source_name, overrides);
}

Config default_config() { return Config{}; }

Config resolved_config(const std::string& yaml_text, const std::string& source_name) {
  // The architecture keys were resolved from model.init_from's folder when the run started;
  // that folder is not read again (it may be gone), only remembered.
  YAML::Node config;
  try {
    config = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(source_name + ": not valid YAML (" + e.what() + ")");
  }
  std::string init_from;
  if (config.IsMap() && config["model"] && config["model"].IsMap() && config["model"]["init_from"]) {
    init_from = config["model"]["init_from"].as<std::string>();
    config["model"].remove("init_from");
  }
  YAML::Emitter out;
  out << config;
  Config resolved = load_config_string(out.c_str(), source_name);
  resolved.model.init_from = init_from;
  return resolved;
}

ModelConfig resolved_model_config(const std::string& yaml_text, const std::string& source_name) {
  return resolved_config(yaml_text, source_name).model;
}

}  // namespace frugal
