// Where and when the optimizer's update runs: a step object the engine calls the same way
// for every configuration (docs/architecture.md, "The step"). This base class is the plain
// update, on the tensors the optimizer holds, after backward; OptimizerOffload
// (strategy/offload.h, strategy.offload.optimizer) runs it on host masters, and can overlap
// it with backward. (strategy.offload.params is zero3's: the sharding keeps its shards on the
// host, and the update stays this plain one.)
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "frugal/config/config.h"

namespace frugal {

class OptimizerUpdate {
 public:
  virtual ~OptimizerUpdate() = default;

  // The engine's sequence, once per step: begin_step before backward, ready from the sharding
  // while the last backward runs (overlapping steps only), finish_step after it.

  // Decides where this step's update runs (the step's learning rate is set first): during
  // backward when this update can (overlaps_backward) and `overlap_allowed` (nothing needs
  // every gradient before the update: no clipping, no loss scaling, no caller reading them);
  // after it otherwise. Returns whether it overlaps.
  bool begin_step(torch::optim::Optimizer& optimizer, bool overlap_allowed);
  bool overlapping() const { return overlapping_; }
  // Parameters (the optimizer's, as the sharding computes with them) whose gradients are
  // final; from any thread.
  virtual void ready(const std::vector<at::Tensor>& params) { (void)params; }
  // The squared norm of gradients this step freed during backward, which the engine can no
  // longer measure (InBackwardUpdate); 0 for a step that did not overlap.
  double freed_grad_norm_squared() const { return overlapping_ ? freed_norm_squared() : 0.0; }

  struct Outcome {
    bool skipped = false;             // the update was not (wholly) applied: reported skipped
    bool parameters_changed = false;  // some parameters moved (the sharding re-gathers them)
  };
  // The update, with `finite` the verdict on this step's gradients. A step that did not
  // overlap is skipped when they are not finite; one that overlapped cannot be (parameters
  // may have been stepped already): it is completed, and reported skipped.
  Outcome finish_step(torch::optim::Optimizer& optimizer, bool finite);

  // After the sharding's zero_grad: gradients this object keeps elsewhere are cleared too
  // (`set_to_none` unless a sharding owns them as buffers).
  virtual void zero_device_grads(bool set_to_none) { (void)set_to_none; }
  // After parameters were written outside the step (a resume): copies held elsewhere follow.
  virtual void reload_from_device() {}
  // The tensor the optimizer steps, and keeps its state under, for `p` (p itself here).
  virtual at::Tensor master_of(const at::Tensor& p) const { return p; }
  // Before the optimizer's state is read or replaced outside the step (a checkpoint's save or
  // load): state kept elsewhere (NVMe offload's file) is brought into host memory, where the
  // optimizer's own tensors hold it until the next step.
  virtual void bring_state_in() {}
  // Whether `t` (a tensor of a state_dict taken since the last step) is the update's own state
  // read in place from where it is kept (NVMe offload maps its file), unchanged until the next
  // step: an asynchronous checkpoint then writes it without a copy in host memory, and hands
  // hold_state_until the moment its write is done, which that step waits for before it changes
  // the state.
  virtual bool kept_until_step(const at::Tensor& t) const {
    (void)t;
    return false;
  }
  virtual void hold_state_until(std::shared_future<void> written) { (void)written; }

 protected:
  // What a subclass that can overlap backward provides: whether it can, the pipeline's start
  // and end (finish_pipeline waits for what ran during backward and updates the rest), and
  // the squared norm of the gradients it freed.
  virtual bool overlaps_backward() const { return false; }
  virtual void begin_pipeline(torch::optim::Optimizer& optimizer) { (void)optimizer; }
  virtual void finish_pipeline() {}
  virtual double freed_norm_squared() const { return 0.0; }
  // The update after backward, with every gradient final.
  virtual void step(torch::optim::Optimizer& optimizer) { optimizer.step(); }

 private:
  bool overlapping_ = false;
};

// What the two optimizer offloads (strategy/offload.h, strategy/nvme_offload.h) share:
// the dtype of a parameter's master, fp32 at least (a bf16 model's updates would round away at
// its own precision), and the device gradient cleared after their step (dropped with
// `set_to_none`, else zeroed in place where a sharding owns it as a buffer).
at::ScalarType master_dtype(at::ScalarType param_dtype);
void clear_device_grad(at::Tensor& device, bool set_to_none);

// Steps only the optimizer's parameters for which `chosen` is true: its groups are cut down to
// them for the call and restored after it (also when it throws). The optimizers frugal offers
// update each parameter from its own gradient and state, so this is the full step's update of
// those parameters.
void step_only(torch::optim::Optimizer& optimizer,
               const std::function<bool(const at::Tensor&)>& chosen);

// What decides where the update runs.
struct UpdateChoice {
  OffloadConfig offload;        // strategy.offload: offload.optimizer moves it to the host
  bool in_backward = false;     // optim.in_backward: each parameter stepped during backward
  double clip_grad_norm = 0.0;  // > 0: clipping (not with in_backward)
  bool loss_scaling = false;    // the precision scales the loss (not with in_backward)
  bool free_gradients = true;   // in_backward drops each gradient (no sharding owns them)
};

// The one factory of updates: InBackwardUpdate for in_backward, NvmeOptimizerOffload for
// offload.optimizer nvme, OptimizerOffload for offload.optimizer ram (unless offload.params
// already keeps the shards on the host), the plain update otherwise. Throws frugal::Error for in_backward with clipping, loss scaling or
// offload.optimizer. Call before the optimizer's first step: offload replaces its parameters
// by host masters.
std::shared_ptr<OptimizerUpdate> make_optimizer_update(const UpdateChoice& choice,
                                                       torch::optim::Optimizer& optimizer);

}  // namespace frugal
