#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "frugal/memory/doctor.h"

namespace frugal::cli {

void add_doctor(CLI::App& app, Action& run) {
  struct Args {
    bool json = false;
    std::string root = "/";
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "doctor", "Check this machine's memory, kernel, pinned-memory, GPU and NCCL settings");
  cmd->add_flag("--json", args->json, "One JSON object, for machines");
  cmd->add_option("--root", args->root, "Read /proc and /sys under this directory (tests)")
      ->group("");  // hidden
  cmd->callback([&run, args] {
    run = [args] {
      const auto findings = memory::diagnose(args->root, memory::probe_process());
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
