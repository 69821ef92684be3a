// What a data loader yields and a model consumes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace frugal {

struct Batch {
  at::Tensor x;  // inputs: (B, T) int64 tokens, (B, F) float features or (B, C, H, W) float images
  at::Tensor y;  // targets: (B, T) int64 next tokens, or (B) int64 class labels

  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  // How many loss terms this batch contributes (the loss is divided by the step's total).
  int64_t num_targets() const { return y.defined() ? y.numel() : 0; }
  // Both tensors on `device`; asynchronous from pinned memory when non_blocking.
  Batch to(const c10::Device& device, bool non_blocking = false) const {
    return {x.to(device, non_blocking), y.to(device, non_blocking)};
  }
};

}  // namespace frugal
