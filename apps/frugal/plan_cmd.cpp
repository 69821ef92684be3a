#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "frugal/config/load.h"
#include "frugal/memory/planner.h"
#include "frugal/memory/stats.h"
#include "frugal/util/error.h"
#include "load.h"

namespace frugal::cli {

void add_plan(CLI::App& app, Action& run) {
  struct Args {
    ConfigSource src;
    int gpus = 1;
    std::string gpu_memory = "80GiB";
    int64_t top = 20;
    bool all = false;
    bool measure = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "plan", "Predict per-rank peak memory of every strategy combination and rank those that fit");
  add_config_options(*cmd, args->src, /*path_required=*/false);
  cmd->add_option("--gpus", args->gpus, "Ranks (GPUs) the job will have")->check(CLI::PositiveNumber);
  cmd->add_option("--gpu-memory", args->gpu_memory, "Memory per rank: 80GiB, 24GB, 512MiB, bytes");
  cmd->add_option("--top", args->top, "Rows to print")->check(CLI::PositiveNumber);
  cmd->add_flag("--all", args->all, "Also print the combinations that do not fit");
  cmd->add_flag("--measure", args->measure,
                "Measure real micro-steps at the config's size instead of tracing on the meta "
                "device (slow for large models)");
  cmd->callback([&run, args] {
    run = [args] {
      const Config cfg = load(args->src);
      memory::PlanOptions o;
      o.gpus = args->gpus;
      // The same spellings as memory.budget.
      o.gpu_memory = load_config_string("memory: {budget: " + args->gpu_memory + "}\n",
                                        "--gpu-memory").memory.budget;
      if (o.gpu_memory <= 0) throw Error("plan: --gpu-memory must be > 0");
      const auto profile = memory::profile_model(cfg, args->measure);
      std::cout << fmt::format("{:.2f}M parameters; activations per micro-step of {}, {}:\n",
                               profile.params / 1e6, profile.measured_batch,
                               profile.traced ? "traced on the meta device" : "measured");
      for (const auto& [key, bytes] : profile.activations) {
        std::cout << fmt::format("  {:<34} {}\n", key, memory::format_bytes(bytes));
      }
      std::cout << "| precision | checkpointing | offload activations | loss chunk | sharding | "
                   "offload optimizer | optimizer | in backward | micro-batch | peak per rank | "
                   "fits | time / sample (est.) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
      int64_t printed = 0;
      for (const auto& r : memory::plan(cfg, profile, o)) {
        if ((!r.fits && !args->all) || printed >= args->top) continue;
        std::cout << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} |\n",
                                 r.precision, r.checkpointing, r.offload_activations ? "yes" : "no",
                                 r.loss_chunk_tokens, r.sharding, r.offload ? "yes" : "no",
                                 r.optimizer, r.in_backward ? "yes" : "no", r.micro_batch,
                                 memory::format_bytes(r.peak_bytes), r.fits ? "yes" : "no",
                                 r.time_per_sample);
        ++printed;
      }
      if (printed == 0) std::cout << "nothing fits: more ranks (--gpus), or a smaller model\n";
      return 0;
    };
  });
}

}  // namespace frugal::cli
