// The one place frugal learns that backward has finished a parameter's gradient: a post hook
// on the parameter's gradient accumulator (autograd's AccumulateGrad node) runs right after
// the gradient was written into .grad, once per backward (a parameter used twice has its
// contributions summed before it). DDP counts its buckets down with it, ZeRO its units, and
// the single-process strategy hands final gradients to optimizer offload's overlapped step.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace frugal {

// Keeps the hooks registered: an accumulator (and its hooks) lives as long as a graph or
// this handle refers to it.
class GradientHooks {
 public:
  GradientHooks() = default;
  // Calls on_accumulated(i) after each backward has accumulated params[i]'s gradient, on the
  // thread autograd runs that node on. Parameters that do not require gradients are skipped.
  // The callback outlives nothing: capture state weakly when it may go away first.
  GradientHooks(const std::vector<at::Tensor>& params, std::function<void(size_t)> on_accumulated);

 private:
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace frugal
