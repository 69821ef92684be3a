// Internal: what libfrugal asks of CUDA beyond torch's device-generic API (c10::Event,
// c10::Stream, the CUDA hooks), answered by libfrugal_cuda.so.
//
// libfrugal does not link torch's CUDA libraries (libtorch_cuda, libc10_cuda, cuBLAS, cuDNN,
// NCCL, ...): loading them costs every process ~0.17 s of start-up, and a machine without an
// NVIDIA driver cannot use them. Before anything else in libfrugal runs (a static initializer,
// cuda_libraries.cpp), libfrugal_cuda.so is loaded from libfrugal's own folder when the machine
// has an NVIDIA driver (or FRUGAL_CUDA=1 says so); it brings torch's CUDA libraries with it,
// which register their kernels and CUDA hooks as they do when linked. Where it is not loaded,
// torch sees no CUDA device and every CUDA path says so (docs/gpu.md, "Loading CUDA").
#pragma once

#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace frugal::cuda {

struct DeviceProperties {
  std::string name;
  int64_t total_bytes = 0;
  int major = 0;  // compute capability
  int minor = 0;
};

// The caching allocator's byte counts over all pools (current and peak).
struct AllocatorStats {
  int64_t allocated = 0, allocated_peak = 0;
  int64_t reserved = 0, reserved_peak = 0;
  int64_t active = 0, active_peak = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual DeviceProperties properties(c10::DeviceIndex index) const = 0;
  virtual AllocatorStats allocator_stats(c10::DeviceIndex index) const = 0;
  virtual void reset_peak_stats(c10::DeviceIndex index) const = 0;
  virtual void empty_cache() const = 0;
  // The allocator's history of every allocation (torch.cuda.memory._record_memory_history),
  // and its snapshot pickled as torch.cuda.memory._snapshot() returns it.
  virtual void record_history() const = 0;
  virtual std::string history_snapshot() const = 0;
  // cudaDriverGetVersion's number (13000 for 13.0); 0 when the driver does not answer.
  virtual int driver_version() const = 0;
  // Page-locks [start, start + bytes) in place (cudaHostRegister); throws std::runtime_error
  // with CUDA's message when refused.
  virtual void register_host(void* start, size_t bytes) const = 0;
  virtual void unregister_host(void* start) const = 0;
  // NCCL's process group for `rank` of `world_size`; makes cuda:local_rank the current device.
  virtual c10::intrusive_ptr<c10d::Backend> nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                         int rank, int world_size, int local_rank,
                                                         std::chrono::milliseconds timeout) const = 0;
};

// Whether libfrugal_cuda.so (and torch's CUDA libraries) are loaded in this process, and in
// words why not, or what loading them said.
struct LoadState {
  bool loaded = false;
  bool failed = false;  // tried, and dlopen or the entry point refused
  std::string detail;
};
const LoadState& load_state();

// The runtime; a frugal::Error saying why CUDA's libraries are not loaded when they are not.
// (Only asked on a CUDA device or tensor, which torch cannot have without them.)
const Runtime& runtime();

// libfrugal_cuda.so's entry point (extern "C", looked up by name).
inline constexpr const char* kEntryPoint = "frugal_cuda_runtime_v1";
using EntryPoint = const Runtime* (*)();

}  // namespace frugal::cuda
