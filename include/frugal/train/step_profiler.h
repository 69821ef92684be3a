// train.profile: LibTorch's profiler (Kineto) over a window of optimizer steps, saved as a
// Chrome trace JSON (open it in Perfetto or chrome://tracing) with frugal's own ranges
// (util/trace.h: micro-steps, forward, backward, recomputes, collectives, the optimizer,
// offload copies and host steps) around ATen's operators. Every rank writes its own trace.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>

#include "frugal/config/config.h"

namespace frugal {

class StepProfiler {
 public:
  StepProfiler(const ProfileConfig& cfg, const std::filesystem::path& run_dir, c10::Device device,
               int rank, int world_size);
  ~StepProfiler();  // a run that fails mid-window stops the profiler without saving
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Call before step `step` (1-based) starts and after it ends.
  void before_step(int64_t step);
  void after_step(int64_t step);
  // Saves a window the run ended inside of.
  void finish();
  // Where the trace goes: RUN_DIR/profile/trace.json (rank r > 0: trace.rank<r>.json).
  const std::filesystem::path& path() const { return path_; }

 private:
  void save();
  void name_trace(const std::filesystem::path& partial) const;
  ProfileConfig cfg_;
  c10::Device device_;
  std::filesystem::path path_;
  bool active_ = false;
  bool done_ = false;
};

}  // namespace frugal
