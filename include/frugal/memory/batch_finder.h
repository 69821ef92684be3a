// The largest micro-batch that fits (`frugal find-batch CFG`): a few training steps of the
// config's model, strategies and data at each candidate size, in this process, until an
// allocation fails (a CUDA out-of-memory error, or on the CPU the tracking allocator's
// memory.budget). `power` doubles from 1 until a size fails; `binsearch` then bisects between
// the last size that fit and the first that did not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

struct FindBatchOptions {
  std::string mode = "binsearch";  // power | binsearch
  int64_t steps = 2;               // optimizer steps per trial
  int64_t max_batch = 4096;        // no trial beyond this
};

struct BatchTrial {
  int64_t micro_batch = 0;
  bool fits = false;
  int64_t peak_bytes = 0;  // the device's (or, on the CPU, the tracker's) peak in the trial
  std::string error;       // why it did not fit
};

struct FindBatchResult {
  int64_t micro_batch = 0;  // 0: not even 1 fits
  std::vector<BatchTrial> trials;
  bool limited_by_data = false;  // the training split has no room for a larger batch
};

// Runs in one process, without sharding (strategy.sharding is set to none for the trials).
// On the CPU it needs memory.budget > 0 (a frugal::Error otherwise: nothing would fail there).
FindBatchResult find_batch(const Config& cfg, const FindBatchOptions& options);

// One trial: `steps` optimizer steps at micro-batch `micro_batch` on cfg's device (budget and
// tracking as they are set), everything freed before it returns.
BatchTrial try_micro_batch(const Config& cfg, int64_t micro_batch, int64_t steps);

// `cfg` with data.micro_batch_size = micro_batch; with keep_global_batch, accumulation raised
// (rounded up) so that micro_batch x accumulation is at least the original global batch.
Config with_micro_batch(const Config& cfg, int64_t micro_batch, bool keep_global_batch);

}  // namespace frugal::memory
