// What a run does when a step's loss or gradients are not finite (train.on_nonfinite):
// - skip: the engine already left the parameters as they were (the update is skipped); the
//   run goes on, and stops after train.max_nonfinite_steps bad steps in a row;
// - halt: the run stops at the first bad step, except fp16-mixed's overflowing gradients
//   with a finite loss: those are the loss scaler's normal signal to back off, and only count
//   towards the limit.
// A step whose update could not be skipped (the pipelined offload and optim.in_backward step
// parameters during backward) always stops the run: its parameters may be non-finite now.
// The error names the step, what was not finite, the first parameter (in the model's order)
// with a non-finite gradient, and advice; the checkpoints stay as they were.
#pragma once

#include <cstdint>
#include <string>

#include "frugal/engine/engine.h"

namespace frugal {

struct NonFiniteOptions {
  std::string policy = "skip";  // skip | halt
  int64_t max_consecutive = 20;
  std::string precision = "fp32";  // the run's resolved strategy.precision (for the advice)
};

class NonFiniteGuard {
 public:
  explicit NonFiniteGuard(NonFiniteOptions options);
  // After each step: throws frugal::Error when the run must stop; returns a line to log
  // when the step was skipped (empty otherwise).
  std::string check(const StepStats& st, bool update_was_pipelined);
  int64_t consecutive() const { return consecutive_; }
  int64_t total_skipped() const { return total_; }

 private:
  [[noreturn]] void stop(const StepStats& st, const std::string& why) const;
  NonFiniteOptions options_;
  bool loss_scaling_;  // the precision scales the loss: an overflow is its scaler's to handle
  int64_t consecutive_ = 0;
  int64_t total_ = 0;
};

}  // namespace frugal
