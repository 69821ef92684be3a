// The largest micro-batch that fits (`frugal find-batch CFG`): a few training steps of the
// config's model, strategies and data at each candidate size, in this process, until an
// allocation fails (a CUDA out-of-memory error, or on the CPU the tracking allocator's
// memory.budget). `power` doubles from 1 until a size fails; `binsearch` then bisects between
// the last size that fit and the first that did not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

struct FindBatchOptions {
  std::string mode = "binsearch";  // power | binsearch
  int64_t steps = 2;               // optimizer steps per trial
  int64_t max_batch = 4096;        // no trial beyond this
  // Room kept free: a size fits only if its peak stays within (1 - margin) of the memory it must
  // fit in (the device's, or memory.budget), as a run's peak varies with its data and the
  // allocator's fragmentation.
  double margin = 0.05;
  std::function<void(int64_t micro_batch)> on_trial;  // called before each trial (progress)
};

struct BatchTrial {
  int64_t micro_batch = 0;
  bool fits = false;
  // The device's (or, on the CPU, the tracker's) peak in the trial; where an allocation was
  // refused (out_of_memory), the peak before it: the size needed more than this.
  int64_t peak_bytes = 0;
  bool out_of_memory = false;
  std::string error;  // why it did not fit: the refusal's first sentence, or the margin
};

struct FindBatchResult {
  int64_t micro_batch = 0;  // 0: not even 1 fits
  int64_t limit_bytes = 0;  // the memory the runs must fit in (device total, or memory.budget)
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
