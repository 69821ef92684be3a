// A CPU allocator that counts live bytes, so that every memory claim (activations saved for
// backward, optimizer state, sharded model state) can be measured on a machine without a GPU.
// Installed process-wide with c10::SetCPUAllocator; tensors allocated before installation
// keep their own deleter and are simply not counted.
//
// With a budget set, an allocation that would take the live total over it fails the way a
// CUDA allocation fails when the device is full (c10::OutOfMemoryError), which lets the
// out-of-memory paths (batch-size finder, OOM advice) be exercised on CPU.
#pragma once

#include <cstdint>

namespace frugal::memory {

struct CpuCounters {
  int64_t current_bytes = 0;  // live bytes allocated through the tracker
  int64_t peak_bytes = 0;     // high-water mark since the last reset_cpu_peak()
  int64_t allocations = 0;    // number of allocations since installation
};

// Installs the tracker as torch's CPU allocator (idempotent, thread-safe).
void install_cpu_tracking();
bool cpu_tracking_installed();
CpuCounters cpu_counters();
// Sets the peak to the current value.
void reset_cpu_peak();
// 0 = no budget.
void set_cpu_budget(int64_t bytes);
int64_t cpu_budget();

}  // namespace frugal::memory
