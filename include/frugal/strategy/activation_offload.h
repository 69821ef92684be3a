// Activation offload (strategy.offload.activations): what backward will need from a block's
// forward waits in host memory instead of the device's, and comes back one block (or
// `prefetch` blocks) ahead of backward reaching it.
//
//   with checkpointing   each checkpointed unit's input (the one activation a checkpoint
//                        keeps) is copied out as the unit's forward starts and brought back
//                        for its recompute: the device keeps no block-boundary input at all
//   without              every tensor autograd saves inside each block (saved-tensor hooks),
//                        except parameters, goes out and comes back the same way
//
// On CUDA the copies run on a side stream into page-locked memory (docs/strategies.md); the
// compute stream waits for a copy only where it uses its result. On the CPU the copies are
// inline and the host copies come from a pool of their own, outside the tracking CPU
// allocator that stands for device memory (memory/cpu_tracking.h), so the device-side saving
// is measurable on a machine without a GPU. Copies are exact: gradients are bit-identical to
// the run without offload.
//
// Backward order: when backward reaches the entry stashed k-th in forward, the `prefetch`
// entries stashed just before it (k-1, k-2, ...) start coming back, since backward reaches
// them next.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace frugal {

// The host pool's and the copies' figures.
struct ActivationOffloadStats {
  int64_t host_bytes = 0;       // host copies alive now
  int64_t host_peak_bytes = 0;  // their high-water mark since the last reset_peak()
  int64_t copies_out = 0;       // tensors copied to the host
  int64_t copies_in = 0;        // tensors copied back (prefetched or fetched)
  int64_t prefetched = 0;       // of those, started ahead of backward asking for them
  int64_t bytes_out = 0;
};

class ActivationOffload {
 public:
  // prefetch: how many entries ahead of backward to bring back (0 = only on demand).
  ActivationOffload(int64_t prefetch, bool pin_memory);

  // One tensor's copy in host memory, kept as long as whoever stashed it holds the handle.
  struct Entry;
  using Handle = std::shared_ptr<Entry>;
  struct HostCounters;  // the host pool's bytes (activation_offload.cpp)

  // Copies `t` to the host and returns its handle; the caller drops its device tensor.
  Handle stash(const at::Tensor& t);
  // The tensor again, on its device, with its sizes, strides and dtype (a prefetched copy
  // when there is one); starts prefetching the entries backward needs next. Any number of
  // times: the host copy stays until the handle goes.
  at::Tensor fetch(const Handle& handle);

  ActivationOffloadStats stats() const;
  void reset_peak();
  int64_t prefetch() const { return prefetch_; }

 private:
  void start_prefetch(Entry& entry);

  int64_t prefetch_;
  bool pin_memory_;
  // The host copies' bytes, shared with each copy's deleter: a copy may outlive this object
  // (the autograd graph that holds it is freed later).
  std::shared_ptr<HostCounters> host_;
  mutable std::mutex mutex_;
  // Every live entry in the order stashed (forward's); expired ones leave the front.
  std::deque<std::weak_ptr<Entry>> order_;
  int64_t next_index_ = 0;
  ActivationOffloadStats stats_;
};

// Applies activation offload to `model`: with checkpointing applied (apply_checkpointing),
// every checkpointed unit keeps its input on the host; without, every block of
// `block_lists` (each a frugal::Unit) offloads what it saves. Returns the units changed.
int64_t apply_activation_offload(torch::nn::Module& model,
                                 const std::shared_ptr<ActivationOffload>& offload,
                                 const std::vector<std::string>& block_lists);

// The name of the wrapper installed on blocks without checkpointing (Unit::has_wrapper).
inline constexpr const char* kActivationOffloadWrapperName = "offload_activations";

}  // namespace frugal
