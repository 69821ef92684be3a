#include "frugal/train/oom_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/memory/oom_advice.h"
#include "frugal/memory/stats.h"
#include "frugal/util/error.h"

namespace frugal {

std::string out_of_memory_report(const OomContext& ctx, const std::string& what,
                                 const torch::nn::Module& model) {
  const c10::Device device = ctx.device;
  const int64_t state_bytes = ctx.state_bytes;
  const memory::MemorySnapshot mem = memory::snapshot(device);
  memory::OomFigures f;
  f.state_bytes = state_bytes;
  f.peak_bytes = mem.allocated_peak;
  f.allocated_bytes = mem.allocated;
  f.reserved_bytes = device.is_cuda() ? mem.reserved : 0;
  f.world_size = ctx.world;
  std::string report = fmt::format("out of memory in step {} on {}: {}\n", ctx.step, device.str(),
                                   first_line(what));
  report += memory::summary_table(mem);
  if (device.is_cuda()) {
    report += fmt::format("\n  fragmentation (reserved - allocated): {}",
                          memory::format_bytes(mem.reserved - mem.allocated));
  }
  report += fmt::format("\n  model state before the step: {}; the step reached {} before failing",
                        memory::format_bytes(state_bytes), memory::format_bytes(mem.allocated_peak));
  // The largest tensors whose owner is known: the model's parameters (and what each brings
  // along: its gradient, and Adam's two moments).
  std::vector<std::pair<int64_t, std::string>> largest;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    largest.emplace_back(static_cast<int64_t>(p.value().numel() * p.value().element_size()), p.key());
  }
  std::sort(largest.rbegin(), largest.rend());
  if (!largest.empty()) report += "\n  largest parameters (each also has a gradient and optimizer state):";
  for (size_t i = 0; i < std::min<size_t>(3, largest.size()); ++i) {
    report += fmt::format("\n    {} {}", largest[i].second, memory::format_bytes(largest[i].first));
  }
  report += "\nwhat would help:";
  for (const auto& line : memory::oom_advice(ctx.cfg, f)) report += "\n  - " + line;
  report += ctx.last_checkpoint.empty()
                ? std::string("\nno checkpoint was written before it")
                : fmt::format("\nthe last checkpoint is kept as it was: {}", ctx.last_checkpoint.string());
  return report;
}

}  // namespace frugal
