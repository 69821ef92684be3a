// Where and when the optimizer's update runs: a step object the engine calls the same way
// for every configuration (docs/architecture.md, "The step"). This base class is the plain
// update, on the tensors the optimizer holds, after backward; OptimizerOffload
// (strategy/offload.h, strategy.offload.optimizer) runs it on host masters, and can overlap
// it with backward. (strategy.offload.params is zero3's: the sharding keeps its shards on the
// host, and the update stays this plain one.)
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

class OptimizerUpdate {
 public:
  virtual ~OptimizerUpdate() = default;

  // Whether the update can start during backward, parameter by parameter as gradients become
  // final (begin_pipeline / ready / finish_pipeline). The engine uses it only when nothing
  // needs every gradient before the update (no clipping, no loss scaling, no caller
  // reading them).
  virtual bool overlaps_backward() const { return false; }
  virtual void begin_pipeline(torch::optim::Optimizer& optimizer) { (void)optimizer; }
  // Parameters (the optimizer's, as the sharding computes with them) whose gradients are
  // final; from any thread.
  virtual void ready(const std::vector<at::Tensor>& params) { (void)params; }
  // Waits for what ran during backward and updates the rest.
  virtual void finish_pipeline() {}

  // The update, after backward, with every gradient final.
  virtual void step(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  // After the sharding's zero_grad: gradients this object keeps elsewhere are cleared too
  // (`set_to_none` unless a sharding owns them as buffers).
  virtual void zero_device_grads(bool set_to_none) { (void)set_to_none; }
  // After parameters were written outside the step (a resume): copies held elsewhere follow.
  virtual void reload_from_device() {}
  // The tensor the optimizer steps, and keeps its state under, for `p` (p itself here).
  virtual at::Tensor master_of(const at::Tensor& p) const { return p; }
  // The squared norm of gradients this object freed during the last backward, which the
  // engine can no longer measure (InBackwardUpdate); 0 here.
  virtual double freed_grad_norm_squared() const { return 0.0; }
};

// The update strategy.offload asks for: OptimizerOffload for offload.optimizer (unless
// offload.params already keeps the shards on the host), the plain update otherwise. Call
// before the optimizer's first step: offload replaces its parameters by host masters.
std::shared_ptr<OptimizerUpdate> make_optimizer_update(const OffloadConfig& offload,
                                                       torch::optim::Optimizer& optimizer);

}  // namespace frugal
