#include "offload_stream.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <unistd.h>

namespace frugal::offload_stream {

struct Marker {
  at::cuda::CUDAEvent event;
};

std::shared_ptr<Marker> mark(c10::Device device) {
  if (!device.is_cuda()) return nullptr;
  auto marker = std::make_shared<Marker>();
  marker->event.record(c10::cuda::getCurrentCUDAStream(device.index()));
  return marker;
}

std::shared_ptr<Marker> on_side_stream(c10::Device device, const std::shared_ptr<Marker>& after,
                                       const std::function<void()>& copies, bool wait_host) {
  if (!device.is_cuda()) {
    copies();
    return nullptr;
  }
  // One side stream per device from the pool, kept for the process.
  static thread_local c10::cuda::CUDAStream side =
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  if (side.device_index() != device.index()) {
    side = c10::cuda::getStreamFromPool(false, device.index());
  }
  if (after) after->event.block(side);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    copies();
  }
  auto done = std::make_shared<Marker>();
  done->event.record(side);
  if (wait_host) done->event.synchronize();
  return done;
}

void wait_on_current(c10::Device device, const std::shared_ptr<Marker>& marker) {
  if (!device.is_cuda() || !marker) return;
  marker->event.block(c10::cuda::getCurrentCUDAStream(device.index()));
}

at::Tensor page_locked_bytes(int64_t bytes) {
  // Whole pages of an allocation of our own: a locked page must not be shared with memory
  // that someone else may lock (or free) separately.
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t locked = (bytes + page - 1) / page * page;
  at::Tensor backing = at::empty({locked + page}, at::TensorOptions().dtype(at::kByte));
  const auto address = reinterpret_cast<uintptr_t>(backing.data_ptr());
  const int64_t skip = static_cast<int64_t>((page - address % page) % page);
  uint8_t* start = backing.data_ptr<uint8_t>() + skip;
  C10_CUDA_CHECK(cudaHostRegister(start, static_cast<size_t>(locked), cudaHostRegisterDefault));
  return at::from_blob(
      start, {bytes},
      [backing](void* p) {
        // Unlocking can only fail for memory that was not locked: nothing to do then.
        (void)cudaHostUnregister(p);
      },
      at::TensorOptions().dtype(at::kByte));
}

}  // namespace frugal::offload_stream
