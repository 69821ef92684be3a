// memory_history.json: the CPU allocator's history (memory.record_history on a CPU run), the
// file `frugal report` draws as a timeline. docs/memory.md describes the format:
//   {"device": "cpu", "start_us", "end_us", "live_at_start", "dropped", "events":
//    [[t_us, delta_bytes, live_bytes], ...], "ranges": [[name, start_us, end_us], ...]}
// Times are steady_clock microseconds since its epoch (the trace ranges' clock).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "frugal/memory/cpu_history.h"

namespace frugal {

// A named span of time: a training phase (forward, backward, optimizer, ...).
struct TimeRange {
  std::string name;
  int64_t start_us = 0;
  int64_t end_us = 0;
};

std::string memory_history_json(const memory::CpuHistory& history,
                                const std::vector<TimeRange>& ranges);

}  // namespace frugal
