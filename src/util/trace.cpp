#include "frugal/util/trace.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <atomic>
#include <chrono>
#include <mutex>

namespace frugal::trace {
namespace {

std::array<std::atomic<int64_t>, kPhases> g_phase_ns{};
// Every communication wait so far (ns, all threads): a phase range subtracts what accrued
// while it was open.
std::atomic<int64_t> g_comm_ns{0};
std::atomic<bool> g_nvtx{false};
std::atomic<bool> g_timing{true};
std::atomic<bool> g_recording{false};

struct Recorded {
  std::mutex mutex;
  std::vector<RecordedRange> ranges;
  int64_t max = 0;
  int64_t dropped = 0;
};
Recorded& recorded() {
  static Recorded r;
  return r;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool profiler_listening() {
  return at::hasCallbacks() && at::isRecordFunctionEnabled();
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::data_wait: return "data_wait";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::comm_wait: return "comm_wait";
    case Phase::optimizer: return "optimizer";
    case Phase::none: break;
  }
  return "none";
}

double PhaseTimes::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

PhaseTimes take_phase_times() {
  PhaseTimes out;
  for (int i = 0; i < kPhases; ++i) out.seconds[i] = g_phase_ns[i].exchange(0) * 1e-9;
  return out;
}

void set_phase_timing(bool on) { g_timing = on; }

int64_t now_us() { return now_ns() / 1000; }

bool names_wanted() {
  return g_nvtx.load(std::memory_order_relaxed) || g_recording.load(std::memory_order_relaxed) ||
         profiler_listening();
}

Range::Range(std::string name, Phase phase) : name_(std::move(name)), phase_(phase) {
  if (!g_timing.load(std::memory_order_relaxed)) phase_ = Phase::none;
  if (name_.empty() && phase_ == Phase::none) return;
  if (phase_ != Phase::none) {
    comm_at_start_ns_ = g_comm_ns.load(std::memory_order_relaxed);
  }
  if (!name_.empty()) {
    // The profiler's callbacks are looked up per range: a profile may start mid-run.
    if (auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE)) {
      profiler_ = std::make_unique<at::RecordFunction>(std::move(*callbacks));
      profiler_->before("frugal/" + name_);
    }
    if (g_nvtx.load(std::memory_order_relaxed)) {
      torch::profiler::impl::cudaStubs()->rangePush(name_.c_str());
      nvtx_ = true;
    }
    recorded_ = g_recording.load(std::memory_order_relaxed);
  }
  if (phase_ != Phase::none || recorded_) start_ns_ = now_ns();
}

Range::~Range() {
  profiler_.reset();  // ends the profiler's range first: it nests inside ours
  if (nvtx_) torch::profiler::impl::cudaStubs()->rangePop();
  if (phase_ == Phase::none && !recorded_) return;
  const int64_t end = now_ns();
  if (phase_ != Phase::none) {
    int64_t own = end - start_ns_;
    if (phase_ == Phase::comm_wait) {
      g_comm_ns.fetch_add(own, std::memory_order_relaxed);
    } else {
      own -= g_comm_ns.load(std::memory_order_relaxed) - comm_at_start_ns_;
    }
    g_phase_ns[static_cast<int>(phase_)].fetch_add(std::max<int64_t>(own, 0),
                                                   std::memory_order_relaxed);
  }
  if (recorded_) {
    Recorded& r = recorded();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (static_cast<int64_t>(r.ranges.size()) < r.max) {
      r.ranges.push_back({name_.empty() ? phase_name(phase_) : name_, start_ns_ / 1000, end / 1000});
    } else {
      ++r.dropped;
    }
  }
}

std::string collective_name(const char* op, int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{} {:.1f} MiB", op, bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{} {:.1f} KiB", op, bytes / 1024.0);
  return fmt::format("{} {} B", op, bytes);
}

void enable_nvtx(bool on) {
  g_nvtx = on && torch::profiler::impl::cudaStubs()->enabled();
}

void record_ranges(bool on, int64_t max_ranges) {
  Recorded& r = recorded();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.max = max_ranges;
  }
  g_recording = on;
}

std::vector<RecordedRange> take_recorded_ranges() {
  Recorded& r = recorded();
  std::lock_guard<std::mutex> lock(r.mutex);
  return std::exchange(r.ranges, {});
}

int64_t dropped_ranges() {
  Recorded& r = recorded();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.dropped;
}

}  // namespace frugal::trace
