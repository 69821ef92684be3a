// The sharding strategy (strategy.sharding.mode): how gradients, parameters and optimizer
// state are spread over the ranks of a job, and when they are communicated. The engine calls
// it at fixed points of the step (docs/architecture.md, "The step"):
//
//   setup({model, optimizer, block lists})  once, after checkpointing has wrapped the blocks;
//                                       may replace the optimizer's parameters (zero*: shards)
//   for each micro-batch i of k:
//     begin_micro_step(i, k)            DDP/FSDP skip communication on micro-steps < k-1
//     forward, loss / sum_across_ranks(targets), backward
//   finish_gradients()                  wait for the reductions launched during backward
//   any_across_ranks(found_inf)         one verdict on overflow for every rank
//   grad_norm_squared(params)           the global norm, whichever rank holds what
//   optimizer step; after_optimizer_step(stepped); zero_grad(optimizer)
//
// `none` is the single-process strategy (and the base class's behaviour); distributed/ddp.h
// holds data parallelism, distributed/zero_sharding.h the sharded modes, both on
// distributed/rank_sharding.h. Implementations own the communicator they were given.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frugal/strategy/state_dict.h"

namespace frugal {

// What a sharding strategy is set up on.
struct ShardingSetup {
  torch::nn::Module& model;
  torch::optim::Optimizer& optimizer;  // not stepped yet
  // The module lists holding the model's blocks (frugal::Unit), e.g. {"blocks"}; may be empty.
  std::vector<std::string> block_lists;
};

class Sharding {
 public:
  virtual ~Sharding() = default;
  virtual std::string name() const { return "none"; }

  // `none`: remembers the optimizer's parameters (for notify_final_gradients).
  virtual void setup(const ShardingSetup& setup);
  virtual void begin_micro_step(int64_t index, int64_t count) {
    (void)index;
    (void)count;
  }
  virtual void finish_gradients();
  // v summed over all ranks (the loss divisor: every rank's targets; the logged loss).
  virtual double sum_across_ranks(double v) { return v; }
  // True when `local` is true on any rank (gradient overflow: every rank skips alike).
  virtual bool any_across_ranks(bool local) { return local; }
  // Sum of squares of every gradient of the model, across ranks (a 0-dim tensor).
  virtual at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params);
  // Optimizer offload's pipeline: asks to be told, during the coming backward (the last
  // micro-step's), as soon as gradients of parameters the optimizer steps are final (reduced);
  // `ready` gets those parameters, possibly on another thread. Disarmed by finish_gradients.
  // Returns false when this strategy cannot tell before finish_gradients. `none`: a gradient
  // is final once backward has accumulated it (strategy/gradient_hooks.h). A strategy that
  // overrides this overrides finish_gradients too.
  virtual bool notify_final_gradients(std::function<void(const std::vector<at::Tensor>&)> ready);
  // After the optimizer's step (stepped = false when it was skipped).
  virtual void after_optimizer_step(bool stepped) { (void)stepped; }
  virtual void zero_grad(torch::optim::Optimizer& optimizer) {
    optimizer.zero_grad(/*set_to_none=*/true);
  }
  // What the engine asks instead of comparing names or types: whether gradients live in
  // buffers this strategy owns (DDP's buckets, ZeRO's flat gradients), which must be zeroed
  // in place and never dropped.
  virtual bool owns_gradient_buffers() const { return false; }

  // strategy.offload.params: keep what the optimizer steps on the host, copied to the device
  // around its use. Call before setup(). Only zero3 can (its shards); the others refuse.
  virtual void set_offload_params(bool pin_memory);

  // Checkpoints (strategy/state_dict.h): what this rank holds of the training state, and the
  // state back from a checkpoint of any layout. `none` (and ddp, whose ranks hold the same):
  // the whole model and the optimizer state of its parameters by name. `holder`: where the
  // optimizer keeps a parameter's state. load_state_dict returns true when the state came
  // back in the layout it was saved in (each rank's random generators may then follow);
  // otherwise its values were redistributed by parameter name.
  virtual StateDict state_dict(const torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                               const StateHolder& holder) const;
  virtual bool load_state_dict(SavedState& saved, torch::nn::Module& model,
                               torch::optim::Optimizer& optimizer, const StateHolder& holder);

  // Outside the training step (evaluation, generation, saving whole weights): with `true`,
  // every parameter of the model holds its full value until called again with `false`.
  // A collective for sharded modes: every rank calls it at the same point.
  virtual void set_full_parameters(bool full) { (void)full; }

 private:
  struct Watch;  // notify_final_gradients of `none`
  std::shared_ptr<Watch> watch_;
};

// set_full_parameters(true) for a scope.
class FullParameters {
 public:
  explicit FullParameters(Sharding& s) : sharding_(s) { sharding_.set_full_parameters(true); }
  ~FullParameters() { sharding_.set_full_parameters(false); }
  FullParameters(const FullParameters&) = delete;
  FullParameters& operator=(const FullParameters&) = delete;

 private:
  Sharding& sharding_;
};

}  // namespace frugal
