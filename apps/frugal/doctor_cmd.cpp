#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/distributed/communicator.h"
#include "frugal/distributed/env.h"
#include "frugal/distributed/network_check.h"
#include "frugal/engine/sharding_registry.h"
#include "frugal/io/disk_bandwidth.h"
#include "frugal/memory/doctor.h"
#include "frugal/memory/planner.h"
#include "frugal/memory/stats.h"
#include "frugal/util/error.h"
#include "load.h"

namespace frugal::cli {
namespace {

// --disk: the folder's direct-I/O bandwidth as three findings (what NVMe offload and
// asynchronous checkpoints would get there).
void add_disk_findings(std::vector<memory::Finding>& findings, const std::string& dir,
                       int64_t mib, const ConfigSource& src) {
  const io::DiskBandwidth d = io::measure_disk(dir, mib << 20);
  auto gib_s = [](double b) { return fmt::format("{:.2f} GiB/s", b / double(int64_t{1} << 30)); };
  const std::string how = fmt::format("{} MiB in {} KiB blocks, {} in flight", d.bytes >> 20,
                                      d.block >> 10, d.depth);
  memory::Finding io{"disk " + dir + " I/O", "", memory::Verdict::ok, ""};
  io.value = fmt::format("{}, {}", d.backend, d.direct ? "O_DIRECT" : "cached (no O_DIRECT)");
  if (!d.fallback_reason.empty()) {
    io.verdict = memory::Verdict::warn;
    io.advice = "io_uring refused (" + d.fallback_reason +
                "): transfers go through a thread pool (allow io_uring for fewer copies of "
                "work per transfer)";
  } else if (!d.direct) {
    io.verdict = memory::Verdict::warn;
    io.advice = "the filesystem refuses O_DIRECT: transfers pass through the page cache, which "
                "competes with training for host memory (use a local ext4/xfs NVMe folder)";
  }
  findings.push_back(io);
  findings.push_back({"disk " + dir + " write", gib_s(d.write_bytes_per_s) + " (" + how + ")",
                      memory::Verdict::info, ""});
  findings.push_back({"disk " + dir + " read", gib_s(d.read_bytes_per_s) + " (" + how + ")",
                      memory::Verdict::info, ""});
  if (src.path.empty()) return;
  // With a config: what offload.optimizer nvme in this folder would add to each step.
  const Config cfg = load(src);
  const memory::NvmeStepCost cost =
      memory::predict_nvme_step(cfg, d.read_bytes_per_s, d.write_bytes_per_s);
  findings.push_back(
      {"offload.optimizer nvme",
       fmt::format("+{:.2f} s per optimizer step: {:.2f} GiB of fp32 masters and {} state read "
                   "and written each step ({}; zero1/2/3 divide it by the ranks)",
                   cost.seconds, static_cast<double>(cost.state_bytes) / double(int64_t{1} << 30),
                   cfg.optim.type, src.path),
       memory::Verdict::info, ""});
}

// --distributed, under a launcher: the collectives' bus bandwidth between the job's ranks and,
// with a config, each sharding mode's communication per step against its compute. Rank 0
// reports; the others only take part.
bool add_distributed_findings(std::vector<memory::Finding>& findings, const ConfigSource& src,
                              int64_t mib) {
  const Config cfg = src.path.empty() ? Config() : load(src);
  const dist::RankInfo info = dist::rank_info_from_env();
  auto comm = dist::init_from_env(cfg.distributed, info);
  const int nodes = info.local_world_size > 0 ? (comm->size() + info.local_world_size - 1) / info.local_world_size : 1;
  findings.push_back({"distributed job",
                      fmt::format("{} ranks on {} node(s) ({}), measured from rank 0",
                                  comm->size(), nodes, comm->backend()),
                      comm->size() > 1 ? memory::Verdict::info : memory::Verdict::warn,
                      comm->size() > 1 ? "" : "one rank: run it under a launcher "
                                              "(frugal launch --nproc-per-node N -- doctor --distributed)"});
  auto gib_s = [](double b) { return fmt::format("{:.2f} GiB/s", b / double(int64_t{1} << 30)); };
  auto time_text = [](double s) {
    return s < 1.0 ? fmt::format("{:.2f} ms", s * 1e3) : fmt::format("{:.2f} s", s);
  };
  auto report = [&](const std::string& where, const std::vector<dist::CollectiveBandwidth>& ms) {
    for (const auto& m : ms) {
      findings.push_back(
          {fmt::format("{}{} {} MiB", where, m.op, m.bytes >> 20),
           m.correct ? fmt::format("{} bus bandwidth ({} per call)", gib_s(m.bus_bytes_per_s),
                                   time_text(m.seconds))
                     : "wrong result",
           m.correct ? memory::Verdict::info : memory::Verdict::bad,
           m.correct ? "" : "the ranks' collective returned wrong values: check the launch "
                            "(ranks, nodes) and the network"});
    }
  };
  const std::vector<dist::CollectiveBandwidth> measured =
      dist::measure_collectives(*comm, {int64_t{1} << 20, mib << 20}, 5);
  report("", measured);
  // The largest size's figures.
  auto links = [](const std::vector<dist::CollectiveBandwidth>& ms) {
    dist::LinkBandwidth b;
    for (const auto& m : ms) (m.op == "all_reduce" ? b.reduce : b.gather) = m.bus_bytes_per_s;
    return b;
  };
  const dist::LinkBandwidth job = links(measured);
  dist::LinkBandwidth in_node, across_nodes;
  // Several nodes of several ranks: the links within a node (each node's ranks together) apart
  // from those across nodes (the ranks of one local rank, one per node), each measured by all
  // groups at once, as a job's collectives would load them.
  const int local = info.local_world_size;
  if (nodes > 1 && local > 1 && comm->size() == nodes * local) {
    const int node = comm->rank() / local, slot = comm->rank() % local;
    std::vector<int> same_node, same_slot;
    for (int r = 0; r < comm->size(); ++r) {
      if (r / local == node) same_node.push_back(r);
      if (r % local == slot) same_slot.push_back(r);
    }
    auto within = comm->subgroup(fmt::format("node{}", node), same_node);
    const auto within_measured = dist::measure_collectives(*within, {mib << 20}, 5);
    report("within a node: ", within_measured);
    in_node = links(within_measured);
    auto across = comm->subgroup(fmt::format("slot{}", slot), same_slot);
    const auto across_measured = dist::measure_collectives(*across, {mib << 20}, 5);
    report("across nodes: ", across_measured);
    across_nodes = links(across_measured);
  }
  if (!src.path.empty()) {
    const memory::ModelProfile shape = memory::model_shape(cfg);
    const int64_t tokens = cfg.data.micro_batch_size *
                           (cfg.data.seq_len > 0 ? cfg.data.seq_len : cfg.model.block_size) *
                           cfg.strategy.accumulation;
    const double flops = dist::measure_matmul_flops(comm->device(), 1.0);
    const double compute_s = 6.0 * static_cast<double>(shape.params) * static_cast<double>(tokens) / flops;
    findings.push_back({"compute per step",
                        fmt::format("{}: forward and backward of {} tokens per rank ({} trained "
                                    "parameters) at this rank's {:.3g} TFLOP/s of matmul",
                                    time_text(compute_s), tokens, shape.params, flops / 1e12),
                        memory::Verdict::info, ""});
    // Every data-parallel mode, built in or registered; those replicated across groups of a
    // node's ranks (hsdp) only where there are several nodes of several ranks.
    const bool grouped = nodes > 1 && local > 1 && comm->size() == nodes * local;
    std::vector<std::pair<std::string, ShardingTraits>> modes;
    for (const std::string& mode : sharding_names()) {
      const ShardingTraits traits = sharding_traits(mode);
      if (traits.data_parallel && (grouped || !traits.replicated_groups)) modes.emplace_back(mode, traits);
    }
    for (const dist::CommShare& c :
         dist::predict_comm_share(modes, shape.params, 4, comm->size(), grouped ? local : comm->size(),
                                  job, in_node, across_nodes, compute_s)) {
      const bool heavy = c.share > 0.5;
      findings.push_back(
          {"communication " + c.mode,
           fmt::format("{:.0f}% of a step: {} ({} B) sent per rank, {} at the measured bus "
                       "bandwidth (none of it overlapped)",
                       c.share * 100, memory::format_bytes(c.sent_bytes), c.sent_bytes,
                       time_text(c.comm_s)),
           heavy ? memory::Verdict::warn : memory::Verdict::info,
           heavy ? "the links, not the ranks, set this mode's pace: more compute per step "
                   "(strategy.accumulation, a larger micro-batch), a faster interconnect, or "
                   "fewer ranks across the slow link"
                 : ""});
    }
  }
  return comm->is_main();
}

}  // namespace

void add_doctor(CLI::App& app, Action& run) {
  struct Args {
    bool json = false;
    std::string root = "/";
    std::string disk;
    int64_t disk_mib = 256;
    bool distributed = false;
    int64_t distributed_mib = 64;
    ConfigSource src;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "doctor", "Check this machine's memory, kernel, pinned-memory, GPU and NCCL settings");
  cmd->add_flag("--json", args->json, "One JSON object, for machines");
  cmd->add_option("--root", args->root, "Read /proc and /sys under this directory (tests)")
      ->group("");  // hidden
  cmd->add_option("--disk", args->disk,
                  "Also measure this folder's direct-I/O write and read bandwidth (a scratch "
                  "file, removed afterwards)");
  cmd->add_option("--disk-mib", args->disk_mib, "MiB the --disk measurement moves each way")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--distributed", args->distributed,
                "Under a launcher: measure all_reduce and all_gather bandwidth between the job's "
                "ranks and, with a config, each sharding mode's communication share of a step");
  cmd->add_option("--distributed-mib", args->distributed_mib,
                  "MiB of the larger --distributed measurement's buffer")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 14));
  // With --disk: the step time offload.optimizer nvme would add for this config; with
  // --distributed: the communication share of a step per sharding mode.
  add_config_options(*cmd, args->src, /*path_required=*/false);
  cmd->callback([&run, args] {
    run = [args] {
      auto findings = memory::diagnose(args->root, memory::probe_process());
      if (!args->src.path.empty() && args->disk.empty() && !args->distributed) {
        throw Error("doctor: a config is read with --disk DIR (the step time NVMe offload there "
                    "would add) or --distributed (each sharding mode's communication share)");
      }
      if (!args->disk.empty()) add_disk_findings(findings, args->disk, args->disk_mib, args->src);
      if (args->distributed &&
          !add_distributed_findings(findings, args->src, args->distributed_mib)) {
        return 0;  // not rank 0: rank 0 reports for the job
      }
      int warnings = 0;
      for (const auto& f : findings) {
        if (f.verdict == memory::Verdict::warn || f.verdict == memory::Verdict::bad) ++warnings;
      }
      if (args->json) {
        nlohmann::json j = {{"findings", nlohmann::json::array()}, {"warnings", warnings}};
        for (const auto& f : findings) {
          j["findings"].push_back({{"name", f.name}, {"value", f.value},
                                   {"verdict", memory::verdict_name(f.verdict)},
                                   {"advice", f.advice}});
        }
        std::cout << j.dump(2) << "\n";
        return 0;
      }
      size_t width = 0;
      for (const auto& f : findings) width = std::max(width, f.name.size());
      for (const auto& f : findings) {
        std::cout << fmt::format("{:<5} {:<{}}  {}\n", memory::verdict_name(f.verdict), f.name,
                                 width, f.value);
        if (!f.advice.empty()) std::cout << fmt::format("      {:<{}}  -> {}\n", "", width, f.advice);
      }
      std::cout << fmt::format("{} finding(s) to look at\n", warnings);
      return 0;
    };
  });
}

}  // namespace frugal::cli
