// frugal: the command line. Errors a user can cause (frugal::Error, bad arguments) print one
// line and exit 2; anything else is an internal error, exit 1.
#include <c10/util/Exception.h>

#include <iostream>

#include "commands.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/process_exit.h"
#include "frugal/util/version.h"

namespace {

// The error line of a command that ran, tagged with the rank in a job whose launcher does not
// tag its ranks' output (torchrun, mpirun): which rank failed is the first question. Written
// at once, so that a signal arriving meanwhile cannot leave half of it.
void error_line(const char* kind, const std::string& message) {
  std::cerr << frugal::log::rank_prefix() + "frugal: " + kind + ": " + message + "\n"
            << std::flush;
}

int run_command(int argc, char** argv) {
  CLI::App app{"frugal: train models that would not otherwise fit, fast", "frugal"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("frugal ") + frugal::version());
  frugal::cli::Action run;
  frugal::cli::add_train(app, run);
  frugal::cli::add_config(app, run);
  frugal::cli::add_export(app, run);
  frugal::cli::add_eval(app, run);
  frugal::cli::add_generate(app, run);
  frugal::cli::add_prepare_text(app, run);
  frugal::cli::add_doctor(app, run);
  frugal::cli::add_find_batch(app, run);
  frugal::cli::add_report(app, run);
  frugal::cli::add_plan(app, run);
  // `frugal launch [OPTIONS] -- COMMAND...`: the command is passed through untouched.
  std::vector<std::string> after_dashes;
  int parsed_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "launch") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        after_dashes.assign(argv + i + 1, argv + argc);
        parsed_argc = i;
        break;
      }
    }
  }
  frugal::cli::add_launch(app, run, after_dashes);
  // A misspelled command: CLI11 would only say "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::cerr << "frugal: error: unknown command '" << argv[1] << "' (expected one of: " << known
                << ")" << std::endl;
      return 2;
    }
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, as every other user error (CLI11's own exit() adds a second, "Run with
    // --help for more information.").
    std::cerr << "frugal: error: " << e.what() << " (see --help)" << std::endl;
    return 2;
  }
  try {
    return run ? run() : 0;
  } catch (const frugal::Error& e) {
    error_line("error", e.what());
    return 2;
  } catch (const c10::OutOfMemoryError& e) {
    // More than the machine holds (a model or batch too large for it) is the input's
    // problem, not frugal's.
    error_line("error", e.what_without_backtrace());
    return 2;
  } catch (const c10::Error& e) {
    error_line("internal error", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    error_line("internal error", e.what());
    return 1;
  }
}

}  // namespace

// Exits without libtorch's static destructors (frugal::exit_process: half a short command's
// time).
int main(int argc, char** argv) { frugal::exit_process(run_command(argc, argv)); }
