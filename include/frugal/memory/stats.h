// Memory figures for one device, the same fields whichever device: on CUDA from the caching
// allocator (allocated / reserved / active, current and peak); on CPU from the tracking
// allocator (allocated = live tensor bytes; reserved = active = allocated, as plain malloc
// keeps no cache); plus the host process's resident memory and its high-water mark.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace frugal::memory {

struct MemorySnapshot {
  std::string device;  // "cpu", "cuda:0"
  int64_t allocated = 0, allocated_peak = 0;
  int64_t reserved = 0, reserved_peak = 0;
  int64_t active = 0, active_peak = 0;
  int64_t host_rss = 0, host_rss_peak = 0;
  bool tracked = false;  // false on CPU when the tracking allocator is not installed
};

MemorySnapshot snapshot(const c10::Device& device);
// Peaks restart from the current values (CUDA: resetPeakStats; CPU: the tracker's peak).
void reset_peaks(const c10::Device& device);
// Returns cached, unused blocks to the driver (CUDA); no-op on CPU.
void empty_cache(const c10::Device& device);
// The memory a run on `device` must fit in: the CUDA device's total; on the CPU `budget`
// (memory.budget) when set, else the host's physical memory.
int64_t memory_limit(const c10::Device& device, int64_t budget);

// memory.record_history (CUDA): the caching allocator records every allocation and free from
// now on; history_snapshot() returns them as the pickle PyTorch's memory viewer reads
// (torch.cuda.memory._snapshot()). No-ops / empty on the CPU.
void start_history(const c10::Device& device);
std::string history_snapshot(const c10::Device& device);

// A table like torch.cuda.memory_summary(): current and peak of each figure, in MiB.
std::string summary_table(const MemorySnapshot& s);
// "1.50 GiB", "12.0 MiB", "512 B"
std::string format_bytes(int64_t bytes);

struct HostMemory {
  int64_t rss_bytes = 0;
  int64_t rss_peak_bytes = 0;
};
// From /proc/self/status (VmRSS, VmHWM).
HostMemory host_memory();
// Restarts the high-water mark (rss_peak_bytes) from the current resident memory.
void reset_host_peak();

}  // namespace frugal::memory
