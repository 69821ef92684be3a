#include "offload_stream.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

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

}  // namespace frugal::offload_stream
