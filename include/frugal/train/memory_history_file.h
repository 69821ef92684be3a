// memory_history.json: the CPU allocator's history (memory.record_history on a CPU run), the
// file `frugal report` draws as a timeline. docs/memory.md describes the format:
//   {"device": "cpu", "start_us", "end_us", "live_at_start", "dropped", "dropped_ranges",
//    "events": [[t_us, delta_bytes, live_bytes], ...],
//    "ranges": [[name, start_us, end_us], ...]}
// Times are steady_clock microseconds since its epoch (trace::now_us, the ranges' clock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/memory/cpu_history.h"
#include "frugal/util/trace.h"

namespace frugal {

// `ranges`: the trace's ranges recorded over the same time (trace::take_recorded_ranges);
// `dropped_ranges`: those it did not keep.
std::string memory_history_json(const memory::CpuHistory& history,
                                const std::vector<trace::RecordedRange>& ranges,
                                int64_t dropped_ranges);

}  // namespace frugal
