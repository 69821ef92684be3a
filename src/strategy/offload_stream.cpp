#include "frugal/strategy/offload_stream.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "cuda/cuda_runtime.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::offload_stream {
namespace {

std::atomic<int64_t> next_marker{1};
std::mutex trace_mutex;
std::atomic<std::vector<TraceEvent>*> trace_sink{nullptr};

void trace(TraceEvent::Kind kind, int64_t marker, int64_t after = 0, bool wait_host = false) {
  if (trace_sink.load(std::memory_order_acquire) == nullptr) return;
  std::lock_guard<std::mutex> lock(trace_mutex);
  if (auto* sink = trace_sink.load()) {
    sink->push_back({kind, marker, after, wait_host, std::this_thread::get_id()});
  }
}

// Streams and events through torch's device-generic API (c10::Stream, c10::Event): libfrugal
// does not link torch's CUDA library, which registers the CUDA implementation of that API.
const c10::impl::DeviceGuardImplInterface& cuda_guard() {
  return *c10::impl::getDeviceGuardImpl(c10::kCUDA);
}

c10::Stream current_stream(c10::Device device) { return cuda_guard().getStream(device); }

}  // namespace

struct Marker {
  int64_t id = next_marker.fetch_add(1);
  // On a CUDA device only (c10::Event asks for the device type's implementation); the CUDA
  // event itself is created at its first record.
  std::optional<c10::Event> event;

  void record(const c10::Stream& stream) {
    if (!event) event.emplace(c10::kCUDA);
    event->record(stream);
  }
  void block(const c10::Stream& stream) const {
    if (event) event->block(stream);
  }
};

int64_t marker_id(const std::shared_ptr<Marker>& marker) { return marker ? marker->id : 0; }

void record_trace(std::vector<TraceEvent>* sink) {
  std::lock_guard<std::mutex> lock(trace_mutex);
  trace_sink.store(sink, std::memory_order_release);
}

std::shared_ptr<Marker> mark(c10::Device device) {
  auto marker = std::make_shared<Marker>();
  if (device.is_cuda()) marker->record(current_stream(device));
  trace(TraceEvent::kMark, marker->id);
  return marker;
}

std::shared_ptr<Marker> on_side_stream(c10::Device device, const std::shared_ptr<Marker>& after,
                                       const std::function<void()>& copies, bool wait_host) {
  auto done = std::make_shared<Marker>();
  if (!device.is_cuda()) {
    copies();
  } else {
    // One side stream per device from the pool, kept for the process.
    static thread_local std::optional<c10::Stream> side;
    if (!side || side->device_index() != device.index()) {
      side = cuda_guard().getStreamFromGlobalPool(device, /*isHighPriority=*/false);
    }
    if (after) after->block(*side);
    {
      c10::StreamGuard guard(*side);
      copies();
    }
    done->record(*side);
    if (wait_host) done->event->synchronize();
  }
  trace(TraceEvent::kSideStream, done->id, marker_id(after), wait_host);
  return done;
}

void wait_on_current(c10::Device device, const std::shared_ptr<Marker>& marker) {
  if (!marker) return;
  if (device.is_cuda()) marker->block(current_stream(device));
  trace(TraceEvent::kWait, marker->id);
}

void keep_for_current_stream(const at::Tensor& t) {
  if (t.is_cuda()) t.record_stream(current_stream(t.device()));
}

PageSpan page_span(uintptr_t address, int64_t bytes, int64_t page_size) {
  PageSpan span;
  span.skip = static_cast<int64_t>((page_size - address % page_size) % page_size);
  span.locked = (bytes + page_size - 1) / page_size * page_size;
  return span;
}

const char* host_memory_name(HostMemory kind) {
  switch (kind) {
    case HostMemory::kRegistered:
      return "page-locked (cudaHostRegister)";
    case HostMemory::kPinnedAllocator:
      return "pinned (torch's pinned allocator)";
    case HostMemory::kPageable:
      break;
  }
  return "pageable (copies wait for the host)";
}

HostBytes host_bytes_with_fallback(int64_t bytes,
                                   const std::function<at::Tensor(int64_t)>& register_pages,
                                   const std::function<at::Tensor(int64_t)>& pinned_allocator) {
  HostBytes got;
  try {
    got.bytes = register_pages(bytes);
    got.kind = HostMemory::kRegistered;
    return got;
  } catch (const std::exception& e) {
    got.refused = fmt::format("cudaHostRegister refused: {}", first_line(e.what()));
  }
  try {
    got.bytes = pinned_allocator(bytes);
    got.kind = HostMemory::kPinnedAllocator;
    return got;
  } catch (const std::exception& e) {
    got.refused += fmt::format("; the pinned allocator refused: {}", first_line(e.what()));
  }
  got.bytes = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  got.kind = HostMemory::kPageable;
  return got;
}

namespace {

at::Tensor registered_bytes(int64_t bytes) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  // One page more than locked, so that the locked range can start on a page boundary.
  const int64_t room = (bytes + page - 1) / page * page + page;
  at::Tensor backing = at::empty({room}, at::TensorOptions().dtype(at::kByte));
  const PageSpan span = page_span(reinterpret_cast<uintptr_t>(backing.data_ptr()), bytes, page);
  uint8_t* start = backing.data_ptr<uint8_t>() + span.skip;
  const cuda::Runtime& runtime = cuda::runtime();
  runtime.register_host(start, static_cast<size_t>(span.locked));
  return at::from_blob(
      start, {bytes}, [backing, &runtime](void* p) { runtime.unregister_host(p); },
      at::TensorOptions().dtype(at::kByte));
}

at::Tensor pinned_bytes(int64_t bytes) {
  return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
}

}  // namespace

at::Tensor page_locked_bytes(int64_t bytes) {
  HostBytes got = host_bytes_with_fallback(bytes, registered_bytes, pinned_bytes);
  // Said once per process and kind: every offloading rank's log tells which it had.
  static std::atomic<bool> said[3] = {false, false, false};
  if (!said[static_cast<int>(got.kind)].exchange(true)) {
    const std::string line = fmt::format("offload host memory: {}{}", host_memory_name(got.kind),
                                         got.refused.empty() ? "" : " (" + got.refused + ")");
    if (got.kind == HostMemory::kRegistered) {
      log::info(line);
    } else {
      log::warn(line);
    }
  }
  return got.bytes;
}

bool pinned_allocator_works() {
  static const bool works = [] {
    if (!at::globalContext().hasCUDA()) return false;
    try {
      (void)pinned_bytes(64);
      return true;
    } catch (const std::exception& e) {
      log::warn(fmt::format("offload host memory: pageable (the pinned allocator refused: {})",
                            first_line(e.what())));
      return false;
    }
  }();
  return works;
}

}  // namespace frugal::offload_stream
