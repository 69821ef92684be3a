#include "frugal/memory/cpu_tracking.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "event_ring.h"
#include "frugal/memory/cpu_history.h"
#include "frugal/util/trace.h"

namespace frugal::memory {
namespace {

// Each block carries its size in a header in front of the data, so freeing needs no lookup
// table and no lock. 64 bytes keeps the data at the 64-byte alignment c10 uses.
constexpr size_t kHeader = 64;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_budget{0};
std::atomic<bool> g_installed{false};

// memory.record_history (cpu_history.h). While `on`, every allocation and free takes the
// mutex around its counter update, so the events' live bytes follow each other exactly
// (live = previous live + delta) even with several threads allocating.
struct HistoryState {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::optional<EventRing<CpuAllocationEvent>> ring;
  int64_t start_us = 0;
  int64_t live_at_start = 0;
};
HistoryState g_history;

void raise_peak(int64_t value) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (value > peak && !g_peak.compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

class TrackingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const auto bytes = static_cast<int64_t>(n);
    int64_t now = 0;
    if (g_history.on.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(g_history.mutex);
      now = count_allocation(bytes);
      if (g_history.ring) g_history.ring->push({trace::now_us(), bytes, now});
    } else {
      now = count_allocation(bytes);
    }
    char* block = nullptr;
    try {
      block = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    } catch (const c10::Error&) {
      // The system has no memory for it: undo the count (the history sees the block come and
      // go), and fail as a full device does, with an OutOfMemoryError (which the trainer's
      // out-of-memory report and the CLI know), not c10's allocator's plain c10::Error.
      if (g_history.on.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> lock(g_history.mutex);
        const int64_t after = g_current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
        if (g_history.ring) g_history.ring->push({trace::now_us(), -bytes, after});
      } else {
        g_current.fetch_sub(bytes, std::memory_order_relaxed);
      }
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", bytes,
                       " bytes (", static_cast<double>(bytes) / (1 << 30), " GiB) with ",
                       now - bytes, " bytes in use, and the system has no memory for it");
    }
    *reinterpret_cast<size_t*>(block) = n;
    void* data = block + kHeader;
    // train.profile.memory: the profiler's [memory] events, as c10's own CPU allocator gives.
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(data, bytes, static_cast<size_t>(now),
                                       static_cast<size_t>(now), c10::Device(c10::kCPU));
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // Adds the bytes to the live count (failing like a full device past the budget); returns
  // the live bytes after.
  static int64_t count_allocation(int64_t bytes) {
    const int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const int64_t budget = g_budget.load(std::memory_order_relaxed);
    if (budget > 0 && now > budget) {
      g_current.fetch_sub(bytes, std::memory_order_relaxed);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU memory budget exceeded: tried to allocate ",
                       bytes, " bytes with ", now - bytes, " of ", budget, " bytes in use");
    }
    raise_peak(now);
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    return now;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static void release(void* data) {
    if (!data) return;
    char* block = static_cast<char*>(data) - kHeader;
    const auto bytes = static_cast<int64_t>(*reinterpret_cast<size_t*>(block));
    int64_t now = 0;
    if (g_history.on.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(g_history.mutex);
      now = g_current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
      if (g_history.ring) g_history.ring->push({trace::now_us(), -bytes, now});
    } else {
      now = g_current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
    }
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(data, -bytes, static_cast<size_t>(now),
                                       static_cast<size_t>(now), c10::Device(c10::kCPU));
    }
    c10::free_cpu(block);
  }
};

}  // namespace

void install_cpu_tracking() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: tensors may outlive any scope, and their deleter lives here.
    static auto* allocator = new TrackingCpuAllocator();
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    g_installed = true;
  });
}

bool cpu_tracking_installed() { return g_installed.load(); }

CpuCounters cpu_counters() {
  return {g_current.load(), g_peak.load(), g_allocations.load()};
}

void reset_cpu_peak() { g_peak.store(g_current.load()); }

void set_cpu_budget(int64_t bytes) { g_budget.store(bytes); }
int64_t cpu_budget() { return g_budget.load(); }

void start_cpu_history(int64_t max_events) {
  std::lock_guard<std::mutex> lock(g_history.mutex);
  g_history.ring.emplace(static_cast<size_t>(std::max<int64_t>(1, max_events)));
  g_history.start_us = trace::now_us();
  g_history.live_at_start = g_current.load();
  g_history.on.store(true);
}

CpuHistory stop_cpu_history() {
  std::lock_guard<std::mutex> lock(g_history.mutex);
  g_history.on.store(false);
  CpuHistory out;
  if (!g_history.ring) return out;
  out.events = g_history.ring->ordered();
  out.dropped = g_history.ring->dropped();
  out.start_us = g_history.start_us;
  out.end_us = trace::now_us();
  out.live_at_start = g_history.live_at_start;
  g_history.ring.reset();
  return out;
}

bool cpu_history_recording() { return g_history.on.load(); }

}  // namespace frugal::memory
