// Optimizer offload's copies on CUDA run on a side stream, so that they overlap the compute
// stream's work: the side stream starts after a marker recorded on the compute stream where the
// gradients became final, and the compute stream waits for the copies back before it next uses
// the parameters. For CPU tensors every call is a no-op (null markers, the function runs
// inline). Only this file sees CUDA's stream and event types.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace frugal::offload_stream {

struct Marker;

// An event on `device`'s current stream (null on the CPU).
std::shared_ptr<Marker> mark(c10::Device device);
// Runs `copies` with `device`'s side stream current, after `after` (when not null); with
// `wait_host`, blocks until they are done (the host is about to read what they wrote).
// Returns a marker of their end (null on the CPU).
std::shared_ptr<Marker> on_side_stream(c10::Device device, const std::shared_ptr<Marker>& after,
                                       const std::function<void()>& copies, bool wait_host);
// `device`'s current stream waits for `marker` (no-op when null).
void wait_on_current(c10::Device device, const std::shared_ptr<Marker>& marker);

// `bytes` bytes of host memory, page-locked (cudaHostRegister) so that copies between it and
// CUDA devices are asynchronous, as a uint8 tensor that unlocks and frees it with its storage.
// Exact size: PyTorch's pinned allocator rounds every allocation up to a power of two, up to
// twice the host memory. The memory comes from the CPU allocator (frugal's tracking counts it).
at::Tensor page_locked_bytes(int64_t bytes);

}  // namespace frugal::offload_stream
