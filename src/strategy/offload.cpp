#include "frugal/strategy/offload.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/autograd.h>
#include <torch/utils.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <optional>

#include "frugal/util/error.h"
#include "frugal/strategy/offload_stream.h"
#include "frugal/util/trace.h"

namespace frugal {

OptimizerOffload::OptimizerOffload(torch::optim::Optimizer& optimizer, bool pin_memory) {
  if (!optimizer.state().empty()) {
    throw Error("strategy.offload.optimizer: set up before the optimizer's first step");
  }
  const bool pin = pin_memory && at::globalContext().hasCUDA();
  torch::NoGradGuard no_grad;
  // 1. Where each master and its gradient go in one host buffer (64-byte aligned places).
  struct Place {
    at::Tensor* param;
    at::ScalarType dtype;
    int64_t master_at, grad_at;  // byte offsets; grad_at -1: no gradient
  };
  std::vector<Place> places;
  int64_t total = 0;
  auto reserve = [&total](int64_t bytes) {
    const int64_t offset = total;
    total += (bytes + 63) / 64 * 64;
    return offset;
  };
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      const at::ScalarType dtype = master_dtype(p.scalar_type());
      const int64_t bytes = p.numel() * static_cast<int64_t>(c10::elementSize(dtype));
      const int64_t master_at = reserve(bytes);
      places.push_back({&p, dtype, master_at, p.requires_grad() ? reserve(bytes) : -1});
    }
  }
  // 2. One allocation for all of them, page-locked when CUDA is present: exact in size, where
  //    PyTorch's pinned allocator would round each tensor up to a power of two.
  host_buffer_ = pin ? offload_stream::page_locked_bytes(total)
                     : at::empty({total}, at::TensorOptions().dtype(at::kByte));
  auto carve = [this](int64_t offset, const at::Tensor& like, at::ScalarType dtype) {
    // Not a view (autograd would track views of the buffer): a tensor over its memory that
    // keeps it alive.
    return at::from_blob(host_buffer_.data_ptr<uint8_t>() + offset, like.sizes(),
                         [keep = host_buffer_](void*) {}, at::TensorOptions().dtype(dtype));
  };
  for (const Place& place : places) {
    at::Tensor& p = *place.param;
    at::Tensor master = carve(place.master_at, p, place.dtype);
    master.copy_(p.detach());
    master.requires_grad_(p.requires_grad());
    if (place.grad_at >= 0) master.mutable_grad() = carve(place.grad_at, p, place.dtype).zero_();
    index_[p.unsafeGetTensorImpl()] = pairs_.size();
    master_index_[master.unsafeGetTensorImpl()] = pairs_.size();
    pairs_.push_back({p, master, master.grad()});
    p = master;  // the optimizer now steps the master
  }
}

OptimizerOffload::~OptimizerOffload() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void OptimizerOffload::step_pairs(torch::optim::Optimizer& optimizer,
                                  const std::vector<size_t>& which,
                                  const std::shared_ptr<offload_stream::Marker>& final_at) {
  torch::NoGradGuard no_grad;
  const c10::Device device = pairs_.empty() ? c10::Device(c10::kCPU) : pairs_.front().device.device();
  // 1. Gradients to the host, on the side stream after the point where they became final; a
  //    parameter without one keeps none (the optimizer skips it).
  std::optional<trace::Range> phase(std::in_place, "offload/copy_to_host");
  offload_stream::on_side_stream(device, final_at, [&] {
    for (size_t i : which) {
      Pair& pair = pairs_[i];
      if (!pair.master.requires_grad()) continue;
      const at::Tensor& g = pair.device.grad();
      if (!g.defined()) {
        pair.master.mutable_grad() = at::Tensor();
        continue;
      }
      if (!pair.master.grad().defined()) pair.master.mutable_grad() = pair.host_grad;
      pair.master.mutable_grad().copy_(g, /*non_blocking=*/true);
    }
  }, /*wait_host=*/true);
  // 2. The host step, of these masters only when they are not all of them.
  phase.emplace("offload/host_step");
  if (which.size() == pairs_.size()) {
    optimizer.step();
  } else {
    std::vector<char> chosen(pairs_.size(), 0);
    for (size_t i : which) chosen[i] = 1;
    step_only(optimizer, [&](const at::Tensor& m) {
      auto it = master_index_.find(m.unsafeGetTensorImpl());
      return it != master_index_.end() && chosen[it->second] != 0;
    });
  }
  // 3. Parameters back to the device, in their own dtype, on the side stream; the compute
  //    stream waits for them at the end of the step.
  phase.emplace("offload/copy_to_device");
  auto back = offload_stream::on_side_stream(device, nullptr, [&] {
    for (size_t i : which) pairs_[i].device.copy_(pairs_[i].master, /*non_blocking=*/true);
  }, /*wait_host=*/false);
  phase.reset();
  std::lock_guard<std::mutex> lock(mutex_);
  copied_back_.push_back(std::move(back));
}

void OptimizerOffload::wait_copies_back() {
  std::vector<std::shared_ptr<offload_stream::Marker>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(copied_back_);
  }
  if (pairs_.empty()) return;
  for (const auto& m : pending) offload_stream::wait_on_current(pairs_.front().device.device(), m);
}

void OptimizerOffload::step(torch::optim::Optimizer& optimizer) {
  std::vector<size_t> all(pairs_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const c10::Device device = pairs_.empty() ? c10::Device(c10::kCPU) : pairs_.front().device.device();
  step_pairs(optimizer, all, offload_stream::mark(device));
  wait_copies_back();
}

void OptimizerOffload::begin_pipeline(torch::optim::Optimizer& optimizer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  pipeline_ = &optimizer;
  handed_.assign(pairs_.size(), 0);
  pipelined_ = 0;
  error_ = nullptr;
}

void OptimizerOffload::ready(const std::vector<at::Tensor>& device_params) {
  std::vector<size_t> which;
  // Where, on the compute stream, these gradients are final (on the thread running backward).
  auto final_at = device_params.empty() ? nullptr : offload_stream::mark(device_params.front().device());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pipeline_ == nullptr) return;
    for (const auto& p : device_params) {
      auto it = index_.find(p.unsafeGetTensorImpl());
      if (it == index_.end() || handed_[it->second]) continue;
      handed_[it->second] = 1;
      which.push_back(it->second);
    }
    if (which.empty()) return;
    queue_.push_back({std::move(which), std::move(final_at)});
  }
  wake_.notify_one();
}

void OptimizerOffload::worker_loop() {
  // LibTorch's profiler records the threads that enabled it; this one joins a profile the
  // training thread runs (train.profile), so the host steps show in its trace.
  bool profiled = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) {
      if (profiled) torch::autograd::profiler::disableProfilerInChildThread();
      return;
    }
    if (const bool wanted = torch::autograd::profiler::isProfilerEnabledInMainThread();
        wanted != profiled) {
      if (wanted) {
        torch::autograd::profiler::enableProfilerInChildThread();
      } else {
        torch::autograd::profiler::disableProfilerInChildThread();
      }
      profiled = wanted;
    }
    Handed item = std::move(queue_.front());
    queue_.pop_front();
    std::vector<size_t>& which = item.pairs;
    busy_ = true;
    torch::optim::Optimizer* optimizer = pipeline_;
    lock.unlock();
    try {
      step_pairs(*optimizer, which, item.final_at);
    } catch (...) {
      std::lock_guard<std::mutex> relock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    pipelined_ += static_cast<int64_t>(which.size());
    busy_ = false;
    idle_.notify_all();
  }
}

void OptimizerOffload::finish_pipeline() {
  torch::optim::Optimizer* optimizer = nullptr;
  std::vector<size_t> rest;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
    optimizer = pipeline_;
    pipeline_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    for (size_t i = 0; i < pairs_.size(); ++i) {
      if (!handed_[i]) rest.push_back(i);
    }
  }
  if (optimizer != nullptr && !rest.empty()) {
    step_pairs(*optimizer, rest, offload_stream::mark(pairs_.front().device.device()));
  }
  wait_copies_back();
}

void OptimizerOffload::zero_device_grads(bool set_to_none) {
  for (Pair& pair : pairs_) clear_device_grad(pair.device, set_to_none);
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
