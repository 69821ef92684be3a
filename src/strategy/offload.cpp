#include "frugal/strategy/offload.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/autograd.h>

#include "frugal/util/error.h"

namespace frugal {

OptimizerOffload::OptimizerOffload(torch::optim::Optimizer& optimizer, bool pin_memory) {
  if (!optimizer.state().empty()) {
    throw Error("strategy.offload.optimizer: set up before the optimizer's first step");
  }
  const bool pin = pin_memory && at::globalContext().hasCUDA();
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      // Masters in fp32 at least: a bf16 model's updates would otherwise round away.
      const at::ScalarType dtype =
          at::isFloatingType(p.scalar_type()) && c10::elementSize(p.scalar_type()) < 4
              ? at::kFloat
              : p.scalar_type();
      const auto host = at::TensorOptions().device(at::kCPU).dtype(dtype).pinned_memory(pin);
      at::Tensor master = at::empty(p.sizes(), host);
      master.copy_(p.detach());
      master.requires_grad_(p.requires_grad());
      if (p.requires_grad()) master.mutable_grad() = at::zeros(p.sizes(), host);
      index_[p.unsafeGetTensorImpl()] = pairs_.size();
      pairs_.push_back({p, master});
      p = master;  // the optimizer now steps the master
    }
  }
}

void OptimizerOffload::step(torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  // 1. Gradients to the host; a parameter without one keeps none (the optimizer skips it).
  for (Pair& pair : pairs_) {
    if (!pair.master.requires_grad()) continue;
    const at::Tensor& g = pair.device.grad();
    if (!g.defined()) {
      pair.master.mutable_grad() = at::Tensor();
      continue;
    }
    if (!pair.master.grad().defined()) pair.master.mutable_grad() = at::zeros_like(pair.master);
    pair.master.mutable_grad().copy_(g, /*non_blocking=*/true);
  }
  // Copies from the device are asynchronous into pinned memory: wait before the host reads.
  if (!pairs_.empty() && pairs_.front().device.is_cuda()) {
    at::detail::getCUDAHooks().deviceSynchronize(pairs_.front().device.device().index());
  }
  // 2. The host step.
  optimizer.step();
  // 3. Parameters back to the device, in their own dtype.
  for (Pair& pair : pairs_) pair.device.copy_(pair.master, /*non_blocking=*/true);
}

void OptimizerOffload::zero_device_grads() {
  for (Pair& pair : pairs_) {
    if (pair.device.grad().defined()) pair.device.mutable_grad().zero_();
  }
}

void OptimizerOffload::reload_from_device() {
  torch::NoGradGuard no_grad;
  for (Pair& pair : pairs_) pair.master.copy_(pair.device);
}

at::Tensor OptimizerOffload::master_of(const at::Tensor& p) const {
  auto it = index_.find(p.unsafeGetTensorImpl());
  return it == index_.end() ? p : pairs_[it->second].master;
}

int64_t OptimizerOffload::host_bytes() const {
  int64_t bytes = 0;
  for (const Pair& pair : pairs_) {
    bytes += static_cast<int64_t>(pair.master.nbytes());
    if (pair.master.grad().defined()) bytes += static_cast<int64_t>(pair.master.grad().nbytes());
  }
  return bytes;
}

}  // namespace frugal
