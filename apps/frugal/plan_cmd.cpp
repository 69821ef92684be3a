#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "frugal/config/load.h"
#include "frugal/io/atomic_file.h"
#include "frugal/memory/planner.h"
#include "frugal/memory/stats.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "load.h"

namespace frugal::cli {
namespace {

// A row's settings ("a=1 b=2") as ready command-line flags ("--set a=1 --set b=2").
std::string as_set_flags(const std::string& settings) {
  std::istringstream in(settings);
  std::string out;
  for (std::string kv; in >> kv;) out += (out.empty() ? "--set " : " --set ") + kv;
  return out;
}

std::vector<std::string> split_settings(const std::string& settings) {
  std::istringstream in(settings);
  std::vector<std::string> out;
  for (std::string kv; in >> kv;) out.push_back(kv);
  return out;
}

std::string gib(int64_t bytes) { return fmt::format("{:.2f}", static_cast<double>(bytes) / (1LL << 30)); }

// A profile's counts and traced activations, ahead of the table.
void print_profile(const memory::ModelProfile& p, const Config& cfg, const memory::PlanOptions& o) {
  std::string frozen;
  if (p.frozen > 0) {
    frozen = fmt::format(", {:.2f}M frozen ({})", p.frozen / 1e6, memory::format_bytes(p.frozen_bytes));
  }
  if (p.nf4_values > 0) {
    frozen += fmt::format(", of which {:.2f}M in NF4 at {:.4f} bytes each", p.nf4_values / 1e6,
                          static_cast<double>(p.nf4_bytes) / static_cast<double>(p.nf4_values));
  }
  std::cout << fmt::format(
      "{}: {:.2f}M trained parameters{}; optimizer {}{}; micro-batch {}{}; activations per "
      "micro-step of {} samples, {}:\n",
      p.finetune, p.params / 1e6, frozen, cfg.optim.type, o.vary_optimizer ? " (varied)" : " (kept)",
      cfg.data.micro_batch_size, o.vary_micro_batch ? " (varied)" : " (kept)", p.measured_batch,
      p.traced ? "traced on the meta device" : "measured");
  for (const auto& [key, bytes] : p.activations) {
    std::cout << fmt::format("  {:<34} {}\n", key, memory::format_bytes(bytes));
  }
}

}  // namespace

void add_plan(CLI::App& app, Action& run) {
  struct Args {
    ConfigSource src;
    int gpus = 1;
    int nodes = 0;
    int gpus_per_node = 0;
    std::string gpu_memory = "80GiB";
    int64_t top = 20;
    bool all = false;
    bool measure = false;
    std::vector<std::string> vary;
    std::string output;
    bool overwrite = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "plan", "Predict per-rank peak memory of every strategy combination and rank those that fit");
  add_config_options(*cmd, args->src, /*path_required=*/false);
  auto* gpus = cmd->add_option("--gpus", args->gpus, "Ranks (GPUs) the job will have")
                   ->check(CLI::PositiveNumber);
  auto* nodes = cmd->add_option("--nodes", args->nodes,
                                "Nodes the job will span (with --gpus-per-node): adds hsdp, "
                                "sharded within each node and replicated across them")
                    ->check(CLI::PositiveNumber);
  auto* per_node = cmd->add_option("--gpus-per-node", args->gpus_per_node,
                                   "Ranks (GPUs) on each node (with --nodes)")
                       ->check(CLI::PositiveNumber);
  nodes->needs(per_node);
  per_node->needs(nodes);
  gpus->excludes(nodes);
  cmd->add_option("--gpu-memory", args->gpu_memory, "Memory per rank: 80GiB, 24GB, 512MiB, bytes");
  cmd->add_option("--top", args->top, "Rows to print")->check(CLI::PositiveNumber);
  cmd->add_flag("--all", args->all, "Also print the combinations that do not fit");
  cmd->add_flag("--measure", args->measure,
                "Measure real micro-steps at the config's size instead of tracing on the meta "
                "device (slow for large models)");
  cmd->add_option("--vary", args->vary,
                  "Also vary what the config fixes: optim (the optimizer), micro_batch "
                  "(x 1/2, 1, 2, 4), finetune (full, LoRA, QLoRA); comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"optim", "micro_batch", "finetune"}));
  cmd->add_option("-o,--output", args->output,
                  "Write the config with the recommended mix here (YAML)");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the -o file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const Config cfg = load(args->src);
      if (!args->output.empty() && std::filesystem::exists(args->output) && !args->overwrite) {
        throw Error(fmt::format("plan: '{}' already exists (pass --overwrite to replace it)",
                                args->output));
      }
      memory::PlanOptions o;
      o.gpus = args->gpus;
      if (args->nodes > 0) {
        o.nodes = args->nodes;
        o.gpus_per_node = args->gpus_per_node;
        o.gpus = args->nodes * args->gpus_per_node;
      }
      // The same spellings as memory.budget.
      o.gpu_memory = load_config_string("memory: {budget: " + args->gpu_memory + "}\n",
                                        "--gpu-memory").memory.budget;
      if (o.gpu_memory <= 0) throw Error("plan: --gpu-memory must be > 0");
      for (const auto& v : args->vary) {
        o.vary_optimizer |= v == "optim";
        o.vary_micro_batch |= v == "micro_batch";
        o.vary_finetune |= v == "finetune";
      }
      // Progress on stderr; stdout holds the plan alone. The traces' own narrative (which
      // units each policy wraps) is the trainer's, not the plan's.
      std::cerr << (args->measure ? "plan: measuring one micro-step per activation setting\n"
                                  : "plan: tracing one micro-step per activation setting on the "
                                    "meta device\n")
                << std::flush;
      std::vector<memory::PlanRow> rows;
      for (const memory::FinetuneVariant& v : memory::finetune_variants(cfg, o.vary_finetune)) {
        log::set_level(log::Level::warn);
        memory::ModelProfile profile;
        try {
          profile = memory::profile_model(v.cfg, args->measure);
        } catch (const Error& e) {
          log::set_level(log::Level::info);
          if (v.settings.empty()) throw;  // the config's own model
          // A variant this model cannot take (NF4 needs weights of 16384-multiples): said,
          // and left out.
          std::cout << fmt::format("{}: not planned ({})\n", v.label, e.what());
          continue;
        }
        log::set_level(log::Level::info);
        profile.finetune_settings = v.settings;
        print_profile(profile, v.cfg, o);
        auto some = memory::plan(v.cfg, profile, o);
        rows.insert(rows.end(), some.begin(), some.end());
      }
      memory::rank_rows(rows);
      std::cout << fmt::format("per rank: {} GiB ({} rank{}{})\n", gib(o.gpu_memory), o.gpus,
                               o.gpus == 1 ? "" : "s",
                               o.nodes > 1 ? fmt::format(": {} nodes of {}", o.nodes, o.gpus_per_node)
                                           : std::string());
      std::cout << "| fine-tune | precision | checkpointing | offload activations | loss chunk "
                   "(tokens) | sharding | offload optimizer | optimizer | in backward | "
                   "micro-batch (samples) | peak per rank (GiB) | headroom (GiB) | fits | host "
                   "(GiB) | disk (GiB) | time / sample (relative, est.) | sent per step per rank (GiB) "
                   "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
      int64_t printed = 0;
      for (const auto& r : rows) {
        if ((!r.fits && !args->all) || printed >= args->top) continue;
        std::cout << fmt::format(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2f} | {} |\n",
            r.finetune, r.precision, r.checkpointing, r.offload_activations ? "yes" : "no",
            r.loss_chunk_tokens,
            r.shard_size > 0 ? fmt::format("{} ({} x {})", r.sharding, o.gpus / r.shard_size, r.shard_size)
                             : r.sharding,
            !r.offload ? "no" : r.nvme ? "nvme" : "ram",
            r.optimizer, r.in_backward ? "yes" : "no", r.micro_batch, gib(r.peak_bytes),
            gib(o.gpu_memory - r.peak_bytes), r.fits ? "yes" : "no", gib(r.host_bytes),
            gib(r.disk_bytes), r.time_per_sample,
            r.comm_across_bytes > 0
                ? fmt::format("{} ({} across nodes)", gib(r.comm_bytes), gib(r.comm_across_bytes))
                : gib(r.comm_bytes));
        ++printed;
      }
      // Rows come fitting first, fastest first: the first that fits is the recommendation.
      if (rows.empty() || !rows.front().fits) {
        std::cout << "nothing fits: more ranks (--gpus), or a smaller model\n";
        return 0;
      }
      const memory::PlanRow& best = rows.front();
      std::cout << fmt::format("recommended (peak {} GiB, headroom {} GiB):\n  {}\n",
                               gib(best.peak_bytes), gib(o.gpu_memory - best.peak_bytes),
                               as_set_flags(best.settings()));
      if (best.nvme && cfg.strategy.offload.nvme_path.empty()) {
        std::cout << fmt::format("  with --set strategy.offload.nvme_path=DIR: a directory on a "
                                 "fast local disk with {} GiB free\n", gib(best.disk_bytes));
      }
      if (!args->output.empty()) {
        ConfigSource with = args->src;
        for (const auto& kv : split_settings(best.settings())) with.overrides.push_back(kv);
        io::write_file_atomic(args->output, to_yaml(load(with)));
        std::cout << fmt::format("wrote {}\n", args->output);
      }
      return 0;
    };
  });
}

}  // namespace frugal::cli
