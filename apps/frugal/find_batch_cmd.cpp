#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "frugal/config/load.h"
#include "frugal/io/atomic_file.h"
#include "frugal/memory/batch_finder.h"
#include "frugal/memory/stats.h"
#include "frugal/util/error.h"
#include "load.h"

namespace frugal::cli {

void add_find_batch(CLI::App& app, Action& run) {
  struct Args {
    ConfigSource src;
    memory::FindBatchOptions options;
    std::string output;
    bool keep_global_batch = false;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "find-batch", "Find the largest micro-batch that fits (CUDA memory, or memory.budget on CPU)");
  add_config_options(*cmd, args->src, /*path_required=*/false);
  cmd->add_option("--mode", args->options.mode, "power (double until it fails) | binsearch (then bisect)")
      ->check(CLI::IsMember({"power", "binsearch"}));
  cmd->add_option("--steps", args->options.steps, "Optimizer steps per trial")->check(at_least(1));
  cmd->add_option("--max-batch", args->options.max_batch, "Largest micro-batch to try")
      ->check(at_least(1));
  cmd->add_option("--margin", args->options.margin,
                  "Memory kept free, as a fraction: a size fits if its peak is within (1 - margin) "
                  "of the device's memory (or memory.budget)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("-o,--output", args->output, "Write the config with the micro-batch found here");
  cmd->add_flag("--keep-global-batch", args->keep_global_batch,
                "With -o: raise strategy.accumulation to keep the global batch");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the -o file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const Config cfg = load(args->src);
      if (!args->output.empty() && std::filesystem::exists(args->output) && !args->overwrite) {
        throw Error(fmt::format("find-batch: '{}' already exists (pass --overwrite to replace it)",
                                args->output));
      }
      // Progress on stderr while trials run (minutes on a GPU); the result once, on stdout.
      args->options.on_trial = [](int64_t b) {
        std::cerr << fmt::format("find-batch: trying micro-batch {}\n", b) << std::flush;
      };
      const memory::FindBatchResult r = memory::find_batch(cfg, args->options);
      std::cout << fmt::format("memory to fit in: {} less a {:g}% margin\n",
                               memory::format_bytes(r.limit_bytes), args->options.margin * 100);
      std::cout << "| micro-batch | fits | peak (MiB) | why not |\n|---|---|---|---|\n";
      for (const auto& t : r.trials) {
        // A refused allocation ends the trial early: it needed more than the peak reached.
        std::cout << fmt::format("| {} | {} | {}{:.1f} | {} |\n", t.micro_batch,
                                 t.fits ? "yes" : "no", t.out_of_memory ? "> " : "",
                                 t.peak_bytes / 1048576.0, t.fits ? "" : t.error);
      }
      if (r.micro_batch == 0) {
        std::cout << "not even a micro-batch of 1 fits: see docs/memory.md and "
                     "README \"When you run out of memory\"\n";
        return 1;
      }
      std::cout << fmt::format("largest micro-batch that fits: {}{}\n", r.micro_batch,
                               r.limited_by_data ? " (limited by the training split's size)" : "");
      if (!args->output.empty()) {
        const Config out = memory::with_micro_batch(cfg, r.micro_batch, args->keep_global_batch);
        io::write_file_atomic(args->output, to_yaml(out));
        std::cout << fmt::format("wrote {} (data.micro_batch_size {}, strategy.accumulation {})\n",
                                 args->output, out.data.micro_batch_size, out.strategy.accumulation);
      }
      return 0;
    };
  });
}

}  // namespace frugal::cli
