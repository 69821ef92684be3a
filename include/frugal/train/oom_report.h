// The message a step that ran out of memory stops the run with: what failed, the memory
// summary (fragmentation on CUDA), the largest parameters, advice from the config
// (memory/oom_advice.h), and the checkpoint that is kept.
#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <string>

#include "frugal/config/config.h"

namespace frugal {

struct OomContext {
  const Config& cfg;
  c10::Device device;
  int64_t state_bytes = 0;  // allocated before the step
  int world = 1;
  int64_t step = 0;         // the step that failed
  std::filesystem::path last_checkpoint;
};

std::string out_of_memory_report(const OomContext& ctx, const std::string& what,
                                 const torch::nn::Module& model);

}  // namespace frugal
