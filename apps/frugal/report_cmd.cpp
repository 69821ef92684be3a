#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "frugal/io/atomic_file.h"
#include "frugal/train/report.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::cli {

void add_report(CLI::App& app, Action& run) {
  struct Args {
    std::string run_dir;
    std::string output;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("report", "Write a run's curves, memory and config as one HTML file");
  cmd->add_option("run_dir", args->run_dir, "Run directory (with metrics.jsonl)")->required();
  cmd->add_option("-o,--output", args->output, "Output file (default: RUN_DIR/report.html)");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the output file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const fs::path out = args->output.empty() ? fs::path(args->run_dir) / "report.html"
                                                : fs::path(args->output);
      if (fs::exists(out) && !args->overwrite) {
        throw Error(fmt::format("report: '{}' already exists (pass --overwrite to replace it)",
                                out.string()));
      }
      io::write_file_atomic(out, render_report(args->run_dir));
      std::cout << fmt::format("wrote {}\n", out.string());
      return 0;
    };
  });
}

}  // namespace frugal::cli
