#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "commands.h"
#include "frugal/distributed/env.h"
#include "frugal/train/trainer.h"
#include "load.h"

namespace frugal::cli {

void add_train(CLI::App& app, Action& run) {
  auto src = std::make_shared<ConfigSource>();
  auto* cmd = app.add_subcommand(
      "train", "Train from a YAML config (without one: a char-level GPT on Debian's fortunes)");
  add_config_options(*cmd, *src, /*path_required=*/false);
  cmd->callback([&run, src] {
    run = [src] {
      // Its place in a job, as the launcher (frugal launch, torchrun, mpirun, srun) set it.
      Trainer trainer(load(*src), dist::rank_info_from_env());
      TrainResult r = trainer.run();
      if (!r.is_main) return 0;  // rank 0 reports for the job
      std::cout << fmt::format("run directory: {}\n", r.run_dir.string());
      std::cout << fmt::format("steps: {}{}\n", r.steps,
                               r.resumed_from >= 0 ? fmt::format(" (resumed at {})", r.resumed_from)
                                                   : std::string());
      if (!std::isnan(r.last_loss)) std::cout << fmt::format("train loss: {:.4f}\n", r.last_loss);
      if (!std::isnan(r.val_loss)) std::cout << fmt::format("val loss: {:.4f}\n", r.val_loss);
      if (!r.last_checkpoint.empty()) {
        std::cout << fmt::format("checkpoint: {}\n", r.last_checkpoint.string());
      }
      if (!r.sample.empty()) std::cout << "--- sample ---\n" << r.sample << "\n--- end sample ---\n";
      return 0;
    };
  });
}

}  // namespace frugal::cli
