// Each subcommand registers itself on the CLI11 app and sets `run` to what executes it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace frugal::cli {

using Action = std::function<int()>;

void add_train(CLI::App& app, Action& run);
void add_config(CLI::App& app, Action& run);
void add_export(CLI::App& app, Action& run);
void add_prepare_text(CLI::App& app, Action& run);
void add_doctor(CLI::App& app, Action& run);
void add_find_batch(CLI::App& app, Action& run);
void add_report(CLI::App& app, Action& run);
void add_plan(CLI::App& app, Action& run);
// `after_dashes`: what followed "--" on the command line (the ranks' command), which main()
// takes off before CLI11 parses the rest.
void add_launch(CLI::App& app, Action& run, const std::vector<std::string>& after_dashes);

// The configuration a command works on: the file given, or the built-in default when
// path is empty; overrides are `--set a.b=value` strings.
struct ConfigSource {
  std::string path;
  std::vector<std::string> overrides;
};
void add_config_options(CLI::App& cmd, ConfigSource& src, bool path_required);

}  // namespace frugal::cli
