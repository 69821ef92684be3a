#include "commands.h"

namespace frugal::cli {

void add_config_options(CLI::App& cmd, ConfigSource& src, bool path_required) {
  auto* opt = cmd.add_option("config", src.path, "YAML config file");
  if (path_required) opt->required();
  cmd.add_option("--set", src.overrides, "Override a key: --set strategy.accumulation=8 (repeatable)")
      ->type_name("KEY=VALUE");
}

}  // namespace frugal::cli
