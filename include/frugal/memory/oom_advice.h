// What to do when a step runs out of memory, computed from the config and what was measured:
// the model state live before the step and the peak the step reached before failing (their
// difference: activations and temporaries, at least). Each line estimates what one change
// would save, cheapest first; the trainer prints them with the memory summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

struct OomFigures {
  int64_t state_bytes = 0;  // live before the step: parameters, gradients, optimizer state
  int64_t peak_bytes = 0;   // reached by the step before it failed
  int64_t reserved_bytes = 0;  // CUDA: held by the caching allocator (0 on the CPU)
  int64_t allocated_bytes = 0;
  int world_size = 1;
};

// "bf16-mixed would save ~1.2 GiB of activations (strategy.precision: bf16-mixed)", ...
std::vector<std::string> oom_advice(const Config& cfg, const OomFigures& f);

}  // namespace frugal::memory
