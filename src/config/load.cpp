// The loading pipeline, in its fixed order: read (with extends) -> overrides -> bind (preset,
// types) -> validate. Each step is one function in its own file.
#include "frugal/config/load.h"

#include "internal.h"

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

}  // namespace frugal
