#include "frugal/strategy/in_backward_update.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

namespace frugal {

void InBackwardUpdate::begin_pipeline(torch::optim::Optimizer& optimizer) {
  std::lock_guard<std::mutex> lock(mutex_);
  optimizer_ = &optimizer;
  done_.clear();
  stepped_ = 0;
  freed_norm_sq_ = 0.0;
}

void InBackwardUpdate::step_subset(const std::vector<at::Tensor>& params) {
  // torch's optimizers step their groups' parameters: for the call, each group holds only
  // those of `params` it has (their state and options stay the group's).
  std::unordered_set<const void*> wanted;
  for (const auto& p : params) wanted.insert(p.unsafeGetTensorImpl());
  step_only(*optimizer_, [&](const at::Tensor& p) { return wanted.count(p.unsafeGetTensorImpl()) != 0; });
}

void InBackwardUpdate::ready(const std::vector<at::Tensor>& params) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (optimizer_ == nullptr) return;
  std::vector<at::Tensor> fresh;
  for (const auto& p : params) {
    if (done_.insert(p.unsafeGetTensorImpl()).second) fresh.push_back(p);
  }
  if (fresh.empty()) return;
  torch::NoGradGuard no_grad;
  step_subset(fresh);
  stepped_ += static_cast<int64_t>(fresh.size());
  if (!free_gradients_) return;
  for (const auto& p : fresh) {
    if (!p.grad().defined()) continue;
    freed_norm_sq_ += p.grad().to(at::kFloat).pow(2).sum().item<double>();
    const_cast<at::Tensor&>(p).mutable_grad().reset();
  }
}

void InBackwardUpdate::finish_pipeline() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (optimizer_ == nullptr) return;
  // Parameters no hook handed over (their gradient came some other way, or none): stepped
  // now, as the plain update would.
  std::vector<at::Tensor> rest;
  for (const auto& group : optimizer_->param_groups()) {
    for (const auto& p : group.params()) {
      if (!done_.count(p.unsafeGetTensorImpl())) rest.push_back(p);
    }
  }
  if (!rest.empty()) {
    torch::NoGradGuard no_grad;
    step_subset(rest);
  }
  optimizer_ = nullptr;
}

}  // namespace frugal
