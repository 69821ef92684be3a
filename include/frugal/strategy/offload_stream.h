// Optimizer offload's copies on CUDA run on a side stream, so that they overlap the compute
// stream's work: the side stream starts after a marker recorded on the compute stream where the
// gradients became final, and the compute stream waits for the copies back before it next uses
// the parameters. For CPU tensors the copies run inline and the markers carry no CUDA event, but
// every call is still ordered and numbered the same way, and a test can record that order
// (record_trace) on a machine without a GPU. Only offload_stream.cpp sees CUDA's stream and
// event types.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace frugal::offload_stream {

struct Marker;

// An event on `device`'s current stream (on the CPU: a numbered marker without one).
std::shared_ptr<Marker> mark(c10::Device device);
// Runs `copies` with `device`'s side stream current, after `after` (when not null); with
// `wait_host`, blocks until they are done (the host is about to read what they wrote).
// Returns a marker of their end.
std::shared_ptr<Marker> on_side_stream(c10::Device device, const std::shared_ptr<Marker>& after,
                                       const std::function<void()>& copies, bool wait_host);
// `device`'s current stream waits for `marker` (no-op when null or on the CPU).
void wait_on_current(c10::Device device, const std::shared_ptr<Marker>& marker);
// Inside on_side_stream's copies: the caching allocator must not hand `t`'s memory to another
// tensor before the current (side) stream is done with it (record_stream; no-op on the CPU).
void keep_for_current_stream(const at::Tensor& t);

// Whole pages to lock for `bytes` bytes of an allocation starting at `address`: skip the bytes
// up to the first page boundary, then lock `locked` bytes (a page-locked range must not share a
// page with memory someone else may lock or free).
struct PageSpan {
  int64_t skip = 0;
  int64_t locked = 0;
};
PageSpan page_span(uintptr_t address, int64_t bytes, int64_t page_size);

// `bytes` bytes of host memory, page-locked (cudaHostRegister) so that copies between it and
// CUDA devices are asynchronous, as a uint8 tensor that unlocks and frees it with its storage.
// Exact size: PyTorch's pinned allocator rounds every allocation up to a power of two, up to
// twice the host memory. The memory comes from the CPU allocator (frugal's tracking counts it).
// Where the system refuses to lock pages (some sandboxes refuse cudaHostRegister), it falls back
// to torch's pinned allocator, and where that is refused too, to pageable memory (copies then
// wait for the host): logged once per process as "offload host memory: ..." (the GPU check's
// rows quote it).
at::Tensor page_locked_bytes(int64_t bytes);

// How host memory for offload was obtained.
enum class HostMemory { kRegistered, kPinnedAllocator, kPageable };
const char* host_memory_name(HostMemory kind);
struct HostBytes {
  at::Tensor bytes;
  HostMemory kind = HostMemory::kPageable;
  std::string refused;  // why the better kinds were refused ("" when the first was taken)
};
// The fallback chain itself, with its two ways of locking memory passed in (each throws when
// refused): page_locked_bytes passes cudaHostRegister and torch's pinned allocator; the tests
// pass refusals of their own.
HostBytes host_bytes_with_fallback(int64_t bytes,
                                   const std::function<at::Tensor(int64_t)>& register_pages,
                                   const std::function<at::Tensor(int64_t)>& pinned_allocator);
// Whether torch's pinned allocator serves here (asked once, with a small allocation): zero3's
// host shards and activation offload use it, and fall back to pageable memory with one warning.
bool pinned_allocator_works();

// The calls above in the order they happened, for tests (tests/unit/test_offload_stream.cpp).
struct TraceEvent {
  enum Kind { kMark, kSideStream, kWait } kind;
  int64_t marker;  // the marker made (kMark, kSideStream: its end) or waited for (kWait)
  int64_t after;   // kSideStream: the marker it started after; 0 = none
  bool wait_host;  // kSideStream: the host waited for it
  std::thread::id thread;
};
// Appends every call to `sink` from now on (nullptr stops); not for concurrent recorders.
void record_trace(std::vector<TraceEvent>* sink);
int64_t marker_id(const std::shared_ptr<Marker>& marker);  // 0 for null

}  // namespace frugal::offload_stream
