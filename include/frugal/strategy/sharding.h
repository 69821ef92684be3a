// The sharding strategy (strategy.sharding.mode): how gradients, parameters and optimizer
// state are spread over the ranks of a job, and when they are communicated. The engine calls
// it at fixed points of the step (GUIDE.md §2):
//
//   setup(model)                        once, after checkpointing has wrapped the blocks
//   for each micro-batch i of k:
//     begin_micro_step(i, k)            DDP/FSDP skip communication on micro-steps < k-1
//     forward, loss / sum_across_ranks(targets), backward
//   finish_gradients()                  wait for the reductions launched during backward
//   grad_norm_squared(params)           the global norm, whichever rank holds what
//   optimizer step; zero_grad(optimizer)
//
// `none` is the single-process strategy (and the base class's behaviour); dist/ddp.h holds
// data parallelism. Implementations own the communicator they were given.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

namespace frugal {

class Sharding {
 public:
  virtual ~Sharding() = default;
  virtual std::string name() const { return "none"; }

  virtual void setup(torch::nn::Module& model) { (void)model; }
  virtual void begin_micro_step(int64_t index, int64_t count) {
    (void)index;
    (void)count;
  }
  virtual void finish_gradients() {}
  // v summed over all ranks (the loss divisor: every rank's targets; the logged loss).
  virtual double sum_across_ranks(double v) { return v; }
  // Sum of squares of every gradient of the model, across ranks (a 0-dim tensor).
  virtual at::Tensor grad_norm_squared(const std::vector<at::Tensor>& params);
  virtual void zero_grad(torch::optim::Optimizer& optimizer) {
    optimizer.zero_grad(/*set_to_none=*/true);
  }
  // Whether this process logs and writes shared files (rank 0).
  virtual bool is_main() const { return true; }
};

}  // namespace frugal
