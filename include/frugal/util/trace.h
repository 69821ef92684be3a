// Named ranges around what a training step does, read by three tools at once:
// - LibTorch's profiler: each range is a RecordFunction user scope named "frugal/<name>", so the
//   Chrome trace Kineto writes (train.profile) shows the step's structure around ATen's ops;
// - NVTX on CUDA (enable_nvtx): the same ranges in Nsight Systems;
// - frugal's own per-phase times (metrics.jsonl's time_*_s) and, with record_ranges(true), a
//   list of every range's start and end for the memory timeline (memory.record_history).
// A range that nobody reads costs two clock reads (phase ranges) or one branch (the others).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace at {
class RecordFunction;
}

namespace frugal::trace {

// Where a step's time goes. Phases do not nest in one another; communication waits inside a
// phase range are taken out of that phase and counted as comm_wait (from any thread), so the
// phases partition the time they cover.
enum class Phase : int { none = -1, data_wait = 0, forward, backward, comm_wait, optimizer };
inline constexpr int kPhases = 5;
// "data_wait", "forward", "backward", "comm_wait", "optimizer".
const char* phase_name(Phase phase);

struct PhaseTimes {
  std::array<double, kPhases> seconds{};
  double operator[](Phase p) const { return seconds[static_cast<int>(p)]; }
  double total() const;
};

// Seconds spent in each phase since the previous call (all threads), reset to zero.
PhaseTimes take_phase_times();
// On by default (train.phase_timing); off, phase ranges read no clock and times stay zero.
void set_phase_timing(bool on);

// The clock of every recorded time: std::chrono::steady_clock, microseconds since its epoch.
int64_t now_us();

// True when someone reads range names (the profiler, NVTX, or range recording): callers that
// format a name (a micro-step's index, a collective's size) do it only then.
bool names_wanted();

class Range {
 public:
  // An empty name with Phase::none is no range at all.
  explicit Range(std::string name, Phase phase = Phase::none);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  std::string name_;
  Phase phase_;
  int64_t start_ns_ = 0;
  int64_t comm_at_start_ns_ = 0;
  bool nvtx_ = false;
  bool recorded_ = false;
  std::unique_ptr<at::RecordFunction> profiler_;  // only while a profiler listens
};

// "all_reduce 4.0 MiB": a collective's range name.
std::string collective_name(const char* op, int64_t bytes);

// NVTX ranges (CUDA builds running on a GPU; a no-op elsewhere).
void enable_nvtx(bool on);

// Keep every range's (name, start, end) from now on, up to `max_ranges` (then the oldest stay
// and later ones are counted as dropped).
struct RecordedRange {
  std::string name;
  int64_t start_us = 0;
  int64_t end_us = 0;
};
void record_ranges(bool on, int64_t max_ranges = 1'000'000);
// The ranges kept so far (closed ones, in the order they ended), cleared.
std::vector<RecordedRange> take_recorded_ranges();
int64_t dropped_ranges();

}  // namespace frugal::trace
