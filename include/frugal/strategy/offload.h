// Optimizer offload (strategy.offload.optimizer), after ZeRO-Offload: the optimizer steps
// fp32 master copies of its parameters kept in host memory (one allocation for all masters and
// their gradients, page-locked when CUDA is present), with its state beside them; the device keeps the parameters it computes with and their gradients.
// Each step, after the gradients are final (reduced, unscaled, clipped on the device):
//   device gradients -> host, optimizer.step() on the host, host masters -> device parameters
//   (in the parameters' dtype). On CUDA both copies run on a side stream into / out of pinned
//   memory, ordered after the point where the gradients became final, and the compute stream
//   waits for the copies back at the end of the step (offload_stream.h).
// Under zero1/2/3 the optimizer's parameters are this rank's shards, so each rank offloads its
// shard only. On a CPU-only machine the copies are host to host and the arithmetic is the
// plain run's, bit for bit (the same optimizer steps the same values).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "frugal/strategy/optimizer_update.h"

namespace frugal {
namespace offload_stream {
struct Marker;
}

class OptimizerOffload final : public OptimizerUpdate {
 public:
  // Replaces every parameter of `optimizer`'s groups with a host master copy (before its first
  // step; a stepped optimizer is a frugal::Error).
  OptimizerOffload(torch::optim::Optimizer& optimizer, bool pin_memory);
  ~OptimizerOffload() override;
  OptimizerOffload(const OptimizerOffload&) = delete;
  OptimizerOffload& operator=(const OptimizerOffload&) = delete;

  // Copies the gradients to the host, steps `optimizer` there, copies the parameters back.
  void step(torch::optim::Optimizer& optimizer) override;
  // Clears the device gradients (the sharding's zero_grad reaches the optimizer's tensors, the
  // masters, only): in place when a sharding owns them as buffers (DDP's buckets, FSDP's flat
  // gradients), otherwise dropped, so that no gradient stays on the device between steps and
  // backward's first gradient for each parameter is taken over rather than added to zeros.
  void zero_device_grads(bool set_to_none) override;
  // The pipelined step, overlapped with backward (ZeRO-Offload's): between begin_pipeline and
  // finish_pipeline, ready(params) hands over parameters whose gradients are final (reduced);
  // a host thread copies those gradients, steps those masters (the optimizer's groups cut down
  // to them) and copies them back while backward goes on. finish_pipeline waits for it and
  // steps whatever was not handed over. Only valid when nothing needs every gradient before
  // the step (no clipping, no loss scaling): begin_step decides.
  bool overlaps_backward() const override { return true; }
  void begin_pipeline(torch::optim::Optimizer& optimizer) override;
  void ready(const std::vector<at::Tensor>& device_params) override;  // from any thread
  void finish_pipeline() override;
  // Parameters the host thread stepped during the last pipelined backward.
  int64_t pipelined_last_step() const { return pipelined_; }

  // After parameters were written on the device outside step() (a resume): masters follow.
  void reload_from_device() override;
  // The host master standing for device tensor `p` in the optimizer (p itself if none).
  at::Tensor master_of(const at::Tensor& p) const override;
  // Bytes of host memory the masters and their gradients take (optimizer state apart).
  int64_t host_bytes() const;
  // The one host allocation they live in: each master and gradient at a 64-byte boundary of
  // it, so at most 63 bytes over host_bytes() per tensor (page-locked as a whole on CUDA).
  const at::Tensor& host_buffer() const { return host_buffer_; }

 private:
  struct Pair {
    at::Tensor device;  // what the model (or the sharding) computes with
    at::Tensor master;  // host, fp32 (the parameter's own dtype when wider), .grad on host
    // The master's gradient buffer (pinned when CUDA is present), put back as its .grad each
    // step: zero_grad(set_to_none) drops .grad, and a fresh one would be pageable memory.
    at::Tensor host_grad;
  };
  // Copies the gradients of pairs `which` over (after `final_at` on CUDA), steps their masters
  // alone, copies them back (on CUDA: on a side stream, see wait_copies_back).
  void step_pairs(torch::optim::Optimizer& optimizer, const std::vector<size_t>& which,
                  const std::shared_ptr<offload_stream::Marker>& final_at);
  // The compute stream waits for every copy back (a no-op on the CPU).
  void wait_copies_back();
  void worker_loop();

  at::Tensor host_buffer_;  // every master and master gradient lives in it (see the constructor)
  std::vector<Pair> pairs_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;         // by device tensor
  std::unordered_map<const c10::TensorImpl*, size_t> master_index_;  // by master

  // The pipeline's host thread and its queue of ready pairs.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  struct Handed {
    std::vector<size_t> pairs;
    std::shared_ptr<offload_stream::Marker> final_at;
  };
  std::deque<Handed> queue_;
  std::vector<std::shared_ptr<offload_stream::Marker>> copied_back_;
  bool busy_ = false;
  bool stop_ = false;
  torch::optim::Optimizer* pipeline_ = nullptr;  // set between begin and finish
  std::vector<char> handed_;                      // per pair, this step
  std::exception_ptr error_;
  int64_t pipelined_ = 0;
};

}  // namespace frugal
