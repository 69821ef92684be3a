// `frugal plan CFG --gpus N --gpu-memory 80GiB`: predicted per-rank peak memory of every
// strategy combination (precision x checkpointing x sharding x offload x optimizer x
// micro-batch), from the parameter count and one measured micro-step of the actual model per
// precision x checkpointing; those that fit, ranked by an estimate of time per sample.
//
// Peak = parameters + gradients + optimizer state (each whole or divided by N as the
// sharding mode's traits say, frugal::sharding_traits; zero3 adds the units it gathers at
// once; offload moves the optimizer's state to the host) + activations (measured at the
// config's micro-batch, scaled linearly).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

struct ModelProfile {
  int64_t params = 0;          // trained parameters
  int64_t largest_block = 0;   // parameters of the largest block
  int64_t root = 0;            // parameters outside the blocks
  int64_t measured_batch = 0;  // micro-batch of the measurements
  // Activation bytes of one micro-step (peak - state - gradients), by "precision/checkpointing".
  std::map<std::string, int64_t> activations;
  bool host_is_device = true;  // CPU runs: offloaded state lands on the same memory
};

struct PlanRow {
  std::string precision = "fp32";
  std::string checkpointing = "none";
  std::string sharding = "none";
  bool offload = false;
  std::string optimizer = "adamw";
  int64_t micro_batch = 1;
  int64_t peak_bytes = 0;        // predicted, per rank
  double time_per_sample = 0.0;  // relative estimate (lower is faster)
  bool fits = false;
};

struct PlanOptions {
  int gpus = 1;
  int64_t gpu_memory = 80LL << 30;
  std::vector<int64_t> micro_batches;  // empty: the config's x 1/2, 1, 2, 4
};

// Measures one micro-step per precision (fp32, bf16-mixed) x checkpointing (none, full) at the
// config's micro-batch, on the config's device.
ModelProfile profile_model(const Config& cfg);
int64_t predict_peak(const ModelProfile& profile, const PlanRow& row, int world);
// Every combination, predicted; fitting rows first, by time_per_sample.
std::vector<PlanRow> plan(const Config& cfg, const ModelProfile& profile, const PlanOptions& o);

}  // namespace frugal::memory
