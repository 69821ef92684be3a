#include <iostream>

#include "commands.h"
#include "frugal/config/load.h"
#include "load.h"

namespace frugal::cli {

void add_config(CLI::App& app, Action& run) {
  auto* cmd = app.add_subcommand("config", "Inspect configs");
  cmd->require_subcommand(1);

  auto show_src = std::make_shared<ConfigSource>();
  auto* show = cmd->add_subcommand("show", "Print the resolved config (extends, presets and --set applied)");
  add_config_options(*show, *show_src, /*path_required=*/false);
  show->callback([&run, show_src] {
    run = [show_src] {
      std::cout << to_yaml(load(*show_src));
      return 0;
    };
  });

  auto check_src = std::make_shared<ConfigSource>();
  auto* validate = cmd->add_subcommand("validate", "Check a config; exit 2 with the first error");
  add_config_options(*validate, *check_src, /*path_required=*/true);
  validate->callback([&run, check_src] {
    run = [check_src] {
      load(*check_src);
      std::cout << check_src->path << ": OK\n";
      return 0;
    };
  });
}

}  // namespace frugal::cli
