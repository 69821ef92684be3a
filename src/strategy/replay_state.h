// What a recomputation must replay to reproduce a forward bit for bit: the random number
// generators' states (dropout) and the autocast state (which ops ran in low precision).
// Captured when the forward runs, replayed around the recompute in backward, and the state
// current before the replay is put back afterwards, so the rest of the step sees the
// generators and autocast exactly as if nothing had been recomputed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace frugal::detail {

struct RngState {
  at::Tensor cpu;                     // the default CPU generator's state
  std::optional<c10::Device> device;  // an accelerator whose generator is also kept
  at::Tensor device_state;
};

// The CPU generator's state, and `device`'s generator's when it is not the CPU (CUDA).
RngState capture_rng(const c10::Device& device);
void restore_rng(const RngState& state);

struct AutocastState {
  bool cpu_enabled = false;
  c10::ScalarType cpu_dtype = c10::ScalarType::BFloat16;
  bool cuda_enabled = false;
  c10::ScalarType cuda_dtype = c10::ScalarType::Half;
  bool cache_enabled = true;

  bool any_enabled() const { return cpu_enabled || cuda_enabled; }
};

AutocastState capture_autocast();

// Sets the generators to `replay` for its lifetime, then back to what they were.
class RngReplay {
 public:
  explicit RngReplay(const RngState& replay);
  ~RngReplay();
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  RngState before_;
};

// Sets autocast (CPU and CUDA) to `replay` for its lifetime, then back to what it was. An
// enabled replay counts as one autocast nesting level, so leaving the outermost level drops
// the cast cache as the AutocastGuard does.
class AutocastReplay {
 public:
  explicit AutocastReplay(const AutocastState& replay);
  ~AutocastReplay();
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

 private:
  static void set(const AutocastState& state);
  AutocastState before_;
  bool nested_;
};

}  // namespace frugal::detail
