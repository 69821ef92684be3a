#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/config/load.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "load.h"

namespace frugal::cli {

void add_config(CLI::App& app, Action& run) {
  auto* cmd = app.add_subcommand("config", "Inspect configs");
  cmd->require_subcommand(1);

  auto show_src = std::make_shared<ConfigSource>();
  auto* show =
      cmd->add_subcommand("show", "Print the resolved config (extends, presets and --set applied)");
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

  // Every key with its type, default and accepted values, from the rules validation checks.
  struct KeysArgs {
    std::string type = "gpt";
    bool json = false;
  };
  auto keys_args = std::make_shared<KeysArgs>();
  auto* keys = cmd->add_subcommand(
      "keys", "List every key: its type, default and what it accepts (as validation checks)");
  keys->add_option("--type", keys_args->type,
                   "The model.type whose own keys' ranges to show (default gpt)");
  keys->add_flag("--json", keys_args->json, "One JSON array, for machines");
  keys->callback([&run, keys_args] {
    run = [keys_args] {
      if (!find_model_spec(keys_args->type)) {
        throw Error(fmt::format("config keys --type: unknown model.type '{}'", keys_args->type));
      }
      const std::vector<KeyInfo> rows = config_keys(keys_args->type);
      if (keys_args->json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
          out.push_back({{"key", r.key},
                         {"type", r.type},
                         {"default", r.default_value},
                         {"accepts", r.accepts}});
        }
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      size_t key_w = 0, type_w = 0, default_w = 0;
      for (const auto& r : rows) {
        key_w = std::max(key_w, r.key.size());
        type_w = std::max(type_w, r.type.size());
        default_w = std::max(default_w, std::min<size_t>(r.default_value.size(), 24));
      }
      for (const auto& r : rows) {
        std::cout << fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", r.key, key_w, r.type, type_w,
                                 r.default_value, default_w, r.accepts);
      }
      return 0;
    };
  });
}

}  // namespace frugal::cli
