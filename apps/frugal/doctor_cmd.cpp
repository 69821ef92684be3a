#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/io/disk_bandwidth.h"
#include "frugal/memory/doctor.h"
#include "frugal/memory/planner.h"
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

}  // namespace

void add_doctor(CLI::App& app, Action& run) {
  struct Args {
    bool json = false;
    std::string root = "/";
    std::string disk;
    int64_t disk_mib = 256;
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
  // With --disk: the step time offload.optimizer nvme would add for this config.
  add_config_options(*cmd, args->src, /*path_required=*/false);
  cmd->callback([&run, args] {
    run = [args] {
      auto findings = memory::diagnose(args->root, memory::probe_process());
      if (!args->src.path.empty() && args->disk.empty()) {
        throw Error("doctor: a config is read with --disk DIR (the step time NVMe offload there "
                    "would add)");
      }
      if (!args->disk.empty()) add_disk_findings(findings, args->disk, args->disk_mib, args->src);
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
