// memory.record_history on the CPU: the tracking allocator (cpu_tracking.h) records every
// allocation and free it serves, like CUDA's caching allocator does for PyTorch's memory
// viewer. Each event is (time, signed byte delta, live bytes after it); the time is
// std::chrono::steady_clock in microseconds since its epoch, the clock of frugal's trace
// ranges, so phases and allocations line up on one axis.
//
// The buffer is bounded: past `max_events` the oldest events are overwritten (a ring, as
// torch.cuda.memory._record_memory_history(max_entries=...) does), so the end of a run, the
// part that ran out of memory, is always kept; `dropped` counts what was overwritten.
// When recording is off the allocator pays one relaxed atomic load per call.
#pragma once

#include <cstdint>
#include <vector>

namespace frugal::memory {

struct CpuAllocationEvent {
  int64_t t_us = 0;   // steady_clock microseconds since its epoch
  int64_t delta = 0;  // +bytes for an allocation, -bytes for a free
  int64_t live = 0;   // the tracker's live bytes right after this event
};

struct CpuHistory {
  std::vector<CpuAllocationEvent> events;  // oldest first
  int64_t dropped = 0;                     // older events overwritten past max_events
  int64_t start_us = 0, end_us = 0;        // when recording started and stopped
  int64_t live_at_start = 0;               // live bytes when recording started
};

// Starts recording (discarding a previous recording); max_events >= 1.
void start_cpu_history(int64_t max_events);
// Stops recording and returns what was recorded (empty if it never started).
CpuHistory stop_cpu_history();
bool cpu_history_recording();

}  // namespace frugal::memory
