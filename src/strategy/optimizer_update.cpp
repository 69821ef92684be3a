#include "frugal/strategy/optimizer_update.h"

#include "frugal/strategy/in_backward_update.h"
#include "frugal/strategy/offload.h"
#include "frugal/util/error.h"

namespace frugal {

bool OptimizerUpdate::begin_step(torch::optim::Optimizer& optimizer, bool overlap_allowed) {
  overlapping_ = overlap_allowed && overlaps_backward();
  if (overlapping_) begin_pipeline(optimizer);
  return overlapping_;
}

OptimizerUpdate::Outcome OptimizerUpdate::finish_step(torch::optim::Optimizer& optimizer,
                                                      bool finite) {
  if (overlapping_) {
    finish_pipeline();
    return {/*skipped=*/!finite, /*parameters_changed=*/true};
  }
  if (!finite) return {/*skipped=*/true, /*parameters_changed=*/false};
  step(optimizer);
  return {/*skipped=*/false, /*parameters_changed=*/true};
}

std::shared_ptr<OptimizerUpdate> make_optimizer_update(const UpdateChoice& choice,
                                                       torch::optim::Optimizer& optimizer) {
  if (choice.in_backward) {
    if (choice.offload.optimizer || choice.clip_grad_norm > 0.0 || choice.loss_scaling) {
      throw Error(
          "optim.in_backward: needs no gradient clipping, no fp16 loss scaling and no "
          "offload.optimizer (which overlaps backward itself)");
    }
    return std::make_shared<InBackwardUpdate>(choice.free_gradients);
  }
  if (choice.offload.optimizer && !choice.offload.params) {
    return std::make_shared<OptimizerOffload>(optimizer, choice.offload.pin_memory);
  }
  return std::make_shared<OptimizerUpdate>();
}

}  // namespace frugal
