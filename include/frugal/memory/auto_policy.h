// strategy.checkpointing.policy: auto. The activation policies in order of their cost in time
// — none, selective (the config's targets), every_k (the config's k), full, full with
// activation offload — each traced on the meta device for this model, precision, micro-batch
// and loss (meta_trace.h) and added to the model state the planner predicts (planner.h); the
// first whose predicted peak stays under the budget, less a margin for what a trace does not
// see (kernels' scratch memory, the allocator's rounding), is the one the run uses.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/config/config.h"

namespace frugal::memory {

// The share of the budget a prediction may fill: the planner's predictions are within 15% of
// measured peaks (tests/integration/test_plan.cpp), and most errors are on the high side.
inline constexpr double kAutoPolicyFill = 0.9;

struct PolicyCandidate {
  CheckpointingConfig checkpointing;
  bool offload_activations = false;
  int64_t predicted_peak = 0;  // bytes per rank
  std::string label() const;   // "every_k (k 2)", "full + activation offload"
};

struct AutoPolicyChoice {
  int64_t budget = 0;  // bytes
  std::vector<PolicyCandidate> considered;  // in order, up to and including the choice
  bool fits = false;  // false: not even the last candidate fits (it is chosen anyway)
  const PolicyCandidate& chosen() const { return considered.back(); }
};

// The budget strategy.checkpointing.memory_budget stands for on `device`: its bytes, or its
// share of the device's memory (CUDA: the GPU's total; CPU: memory.budget if set, else the
// machine's RAM); unset: memory.budget on the CPU, the GPU's total on CUDA. A CPU run with
// neither is a frugal::Error.
int64_t auto_policy_budget(const Config& cfg, const c10::Device& device);

AutoPolicyChoice choose_checkpointing(const Config& cfg, const c10::Device& device, int world_size);

// When cfg's policy is auto: chooses, writes the choice into cfg (checkpointing and
// strategy.offload.activations, so that config.resolved.yaml records it) and logs what was
// considered. Otherwise does nothing.
void resolve_auto_checkpointing(Config& cfg, const c10::Device& device, int world_size);

}  // namespace frugal::memory
