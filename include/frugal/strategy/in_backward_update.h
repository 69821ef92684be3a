// The optimizer step inside backward (optim.in_backward): each parameter is updated as soon as
// its gradient is final, and that gradient is freed at once, so a step holds the gradients in
// flight (a bucket, a block's parameters) instead of 4 bytes x every parameter. What
// torch's `register_post_accumulate_grad_hook` recipe and Galore/LOMO-style trainers do.
//
// The same parameters as the plain step (bit for bit: the same update on the same gradient,
// parameter by parameter), when nothing needs every gradient first: no clipping, no fp16 loss
// scaling (config validation refuses both), no caller reading gradients (forward_backward()
// then optimizer_step() takes the plain path). Under accumulation the first micro-steps keep
// their gradients as usual; the saving is in the last. Gradients a sharding owns as buffers
// (zero2/3's shards) are stepped early but not freed.
#pragma once

#include <mutex>
#include <unordered_set>

#include "frugal/strategy/optimizer_update.h"

namespace frugal {

class InBackwardUpdate : public OptimizerUpdate {
 public:
  // free_gradients: drop each gradient after its update (not when a sharding owns them).
  explicit InBackwardUpdate(bool free_gradients) : free_gradients_(free_gradients) {}

  // Steps `params` now, on the thread running backward, and frees their gradients.
  void ready(const std::vector<at::Tensor>& params) override;

  // How many parameters the last backward stepped early.
  int64_t stepped_in_backward() const { return stepped_; }

 protected:
  bool overlaps_backward() const override { return true; }
  void begin_pipeline(torch::optim::Optimizer& optimizer) override;
  void finish_pipeline() override;
  // The squared norm of the gradients freed during the last backward (they are gone when the
  // engine measures the norm).
  double freed_norm_squared() const override { return freed_norm_sq_; }

 private:
  void step_subset(const std::vector<at::Tensor>& params);

  bool free_gradients_;
  std::mutex mutex_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::unordered_set<const void*> done_;
  int64_t stepped_ = 0;
  double freed_norm_sq_ = 0.0;
};

}  // namespace frugal
