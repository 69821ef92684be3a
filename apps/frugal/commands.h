// Each subcommand registers itself on the CLI11 app and sets `run` to what executes it.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

namespace frugal::cli {

using Action = std::function<int()>;

void add_train(CLI::App& app, Action& run);
void add_config(CLI::App& app, Action& run);
void add_export(CLI::App& app, Action& run);
void add_eval(CLI::App& app, Action& run);
void add_generate(CLI::App& app, Action& run);
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

// Numbers at least / above a bound. CLI11's PositiveNumber and NonNegativeNumber say
// "Value 0 not in range 0.000000 to 1797693134862315708145274237317043567980...", the whole
// of DBL_MAX in digits.
inline CLI::Validator number_from(double min, bool min_allowed) {
  const std::string wanted =
      std::string(min_allowed ? "a number >= " : "a number > ") + CLI::detail::to_string(min);
  return CLI::Validator(
      [min, min_allowed, wanted](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        const bool ok = !value.empty() && *end == '\0' && !std::isnan(v) &&
                        (min_allowed ? v >= min : v > min);
        return ok ? std::string() : "expected " + wanted + ", got '" + value + "'";
      },
      wanted);
}
inline CLI::Validator at_least(double min) { return number_from(min, true); }
inline CLI::Validator above(double min) { return number_from(min, false); }

}  // namespace frugal::cli
