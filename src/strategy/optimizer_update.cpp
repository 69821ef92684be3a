#include "frugal/strategy/optimizer_update.h"

#include "frugal/strategy/in_backward_update.h"
#include "frugal/strategy/nvme_offload.h"
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

at::ScalarType master_dtype(at::ScalarType param_dtype) {
  return at::isFloatingType(param_dtype) && c10::elementSize(param_dtype) < 4 ? at::kFloat
                                                                              : param_dtype;
}

void clear_device_grad(at::Tensor& device, bool set_to_none) {
  if (!device.grad().defined()) return;
  if (set_to_none) {
    device.mutable_grad().reset();
  } else {
    device.mutable_grad().zero_();
  }
}

void step_only(torch::optim::Optimizer& optimizer,
               const std::function<bool(const at::Tensor&)>& chosen) {
  auto& groups = optimizer.param_groups();
  std::vector<std::vector<at::Tensor>> saved;
  saved.reserve(groups.size());
  for (auto& group : groups) {
    saved.push_back(group.params());
    std::vector<at::Tensor> subset;
    for (const auto& p : saved.back()) {
      if (chosen(p)) subset.push_back(p);
    }
    group.params() = std::move(subset);
  }
  auto restore = [&] {
    for (size_t g = 0; g < saved.size(); ++g) groups[g].params() = std::move(saved[g]);
  };
  try {
    optimizer.step();
  } catch (...) {
    restore();
    throw;
  }
  restore();
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
  if (choice.offload.optimizer.where == OptimizerPlace::nvme) {
    NvmeOffloadOptions nvme;
    nvme.dir = choice.offload.nvme_path;
    nvme.buffer_bytes = static_cast<int64_t>(choice.offload.buffer_mb * (1 << 20));
    nvme.require_direct = choice.offload.nvme_require_direct;
    return std::make_shared<NvmeOptimizerOffload>(optimizer, nvme);
  }
  if (choice.offload.optimizer && !choice.offload.params) {
    return std::make_shared<OptimizerOffload>(optimizer, choice.offload.pin_memory);
  }
  return std::make_shared<OptimizerUpdate>();
}

}  // namespace frugal
