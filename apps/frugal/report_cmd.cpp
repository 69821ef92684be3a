#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <vector>

#include "commands.h"
#include "frugal/io/atomic_file.h"
#include "frugal/report/report.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::cli {

void add_report(CLI::App& app, Action& run) {
  struct Args {
    std::vector<std::string> run_dirs;
    std::string output;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report", "Write runs' curves, memory and config as one HTML file (several runs overlaid)");
  cmd->add_option("runs", args->run_dirs, "Run directories (with metrics.jsonl)")->required();
  cmd->add_option("-o,--output", args->output,
                  "Output file (default with one run: RUN/report.html; required with several)");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the output file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      // Several runs belong to none of them: where their comparison goes is the user's call.
      if (args->output.empty() && args->run_dirs.size() > 1) {
        throw Error("report: with several runs, name the output file (-o compare.html)");
      }
      const fs::path out = args->output.empty() ? fs::path(args->run_dirs[0]) / "report.html"
                                                : fs::path(args->output);
      if (fs::exists(out) && !args->overwrite) {
        throw Error(fmt::format("report: '{}' already exists (pass --overwrite to replace it)",
                                out.string()));
      }
      io::write_file_atomic(out, render_report(std::vector<fs::path>(args->run_dirs.begin(), args->run_dirs.end())));
      std::cout << fmt::format("wrote {}\n", out.string());
      return 0;
    };
  });
}

}  // namespace frugal::cli
