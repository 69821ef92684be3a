#include "frugal/train/nonfinite_guard.h"

#include <fmt/format.h>

#include <cmath>

#include "frugal/strategy/precision.h"
#include "frugal/util/error.h"

namespace frugal {

NonFiniteGuard::NonFiniteGuard(NonFiniteOptions options)
    : options_(std::move(options)),
      loss_scaling_(precision_spec(options_.precision).loss_scaling) {}

std::string NonFiniteGuard::check(const StepStats& st, bool update_was_pipelined) {
  const bool loss_ok = std::isfinite(st.loss);
  if (loss_ok && !st.skipped) {
    consecutive_ = 0;
    return "";
  }
  ++consecutive_;
  ++total_;
  const std::string what = !loss_ok ? fmt::format("the loss is {}", st.loss)
                                    : "the gradients are not finite";
  if (update_was_pipelined) {
    stop(st, what + " and the update ran during backward (offload's pipeline or "
                    "optim.in_backward), so it could not be skipped");
  }
  const bool scaler_overflow = loss_scaling_ && loss_ok;
  if (options_.policy == "halt" && !scaler_overflow) stop(st, what + " (train.on_nonfinite: halt)");
  if (consecutive_ >= options_.max_consecutive) {
    stop(st, fmt::format("{}, and the last {} steps were skipped (train.max_nonfinite_steps)",
                         what, consecutive_));
  }
  return fmt::format("step {}: {}; update skipped ({} in a row){}", st.step, what, consecutive_,
                     st.nonfinite_gradient.empty()
                         ? ""
                         : fmt::format(", first in {}", st.nonfinite_gradient));
}

void NonFiniteGuard::stop(const StepStats& st, const std::string& why) const {
  std::string where = st.nonfinite_gradient.empty()
                          ? ""
                          : fmt::format(" The first parameter with a non-finite gradient, in the "
                                        "model's order: {}.",
                                        st.nonfinite_gradient);
  std::string advice;
  if (loss_scaling_) {
    advice = fmt::format(
        " {}'s loss scale is down to {:g}: the model overflows it even so; use "
        "strategy.precision: bf16-mixed (same memory, fp32's range) or a lower optim.lr.",
        options_.precision, st.loss_scale);
  } else {
    advice = " Try a lower optim.lr, a longer schedule.warmup_steps or optim.clip_grad_norm.";
  }
  throw Error(fmt::format("training stopped at step {}: {}.{}{} The checkpoints written so far "
                          "are kept (no checkpoint is written from non-finite parameters).",
                          st.step, why, where, advice));
}

}  // namespace frugal
