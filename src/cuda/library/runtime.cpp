// libfrugal_cuda.so: frugal's calls into torch's CUDA libraries and the CUDA runtime, linked
// against them; libfrugal loads it where CUDA can run (src/cuda/cuda_runtime.h).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <stdexcept>

#include "cuda/cuda_runtime.h"

namespace frugal::cuda {
namespace {

using c10::CachingAllocator::StatType;

class CudaRuntime final : public Runtime {
 public:
  DeviceProperties properties(c10::DeviceIndex index) const override {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
    return {p->name, static_cast<int64_t>(p->totalGlobalMem), p->major, p->minor};
  }

  AllocatorStats allocator_stats(c10::DeviceIndex index) const override {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    const auto all = static_cast<size_t>(StatType::AGGREGATE);
    AllocatorStats s;
    s.allocated = stats.allocated_bytes[all].current;
    s.allocated_peak = stats.allocated_bytes[all].peak;
    s.reserved = stats.reserved_bytes[all].current;
    s.reserved_peak = stats.reserved_bytes[all].peak;
    s.active = stats.active_bytes[all].current;
    s.active_peak = stats.active_bytes[all].peak;
    return s;
  }

  void reset_peak_stats(c10::DeviceIndex index) const override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(index);
  }

  void empty_cache() const override { c10::cuda::CUDACachingAllocator::emptyCache(); }

  void record_history() const override {
    torch::cuda::_record_memory_history(std::string("all"), std::string("all"), "python",
                                        /*max_entries=*/1000000);
  }

  std::string history_snapshot() const override { return torch::cuda::_memory_snapshot_pickled(); }

  int driver_version() const override {
    int driver = 0;
    return cudaDriverGetVersion(&driver) == cudaSuccess ? driver : 0;
  }

  void register_host(void* start, size_t bytes) const override {
    const cudaError_t err = cudaHostRegister(start, bytes, cudaHostRegisterDefault);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it, so that the next CUDA call does not see it
      throw std::runtime_error(cudaGetErrorString(err));
    }
  }

  void unregister_host(void* start) const override {
    // Unlocking can only fail for memory that was not locked: nothing to do then.
    (void)cudaHostUnregister(start);
  }

  c10::intrusive_ptr<c10d::Backend> nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size, int local_rank,
                                                 std::chrono::milliseconds timeout) const override {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
  }
};

}  // namespace
}  // namespace frugal::cuda

extern "C" __attribute__((visibility("default"))) const frugal::cuda::Runtime*
frugal_cuda_runtime_v1() {
  static const frugal::cuda::CudaRuntime runtime;
  return &runtime;
}
