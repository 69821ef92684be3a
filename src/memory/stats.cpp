#include "frugal/memory/stats.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "cuda/cuda_runtime.h"
#include "frugal/memory/cpu_tracking.h"

namespace frugal::memory {
namespace {

bool cuda_device(const c10::Device& d) {
  if (!d.is_cuda() || !at::globalContext().hasCUDA()) return false;
  // The caching allocator's per-device tables exist only after CUDA's lazy initialisation,
  // which LibTorch runs at the first CUDA tensor: find-batch resets the peaks before any, and
  // the allocator refused ("Invalid device argument").
  at::globalContext().lazyInitDevice(c10::kCUDA);
  return true;
}

}  // namespace

HostMemory host_memory() {
  HostMemory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    int64_t kb = 0;
    if (key == "VmRSS:" && status >> kb) {
      m.rss_bytes = kb * 1024;
    } else if (key == "VmHWM:" && status >> kb) {
      m.rss_peak_bytes = kb * 1024;
    }
    status.ignore(1 << 20, '\n');
  }
  return m;
}

void reset_host_peak() {
  // Linux's way to restart VmHWM from VmRSS; where it is refused the peak stays the process's.
  std::ofstream("/proc/self/clear_refs") << "5";
}

MemorySnapshot snapshot(const c10::Device& device) {
  MemorySnapshot s;
  const HostMemory host = host_memory();
  s.host_rss = host.rss_bytes;
  s.host_rss_peak = host.rss_peak_bytes;
  if (cuda_device(device)) {
    const auto index = device.has_index() ? device.index() : c10::DeviceIndex(0);
    s.device = fmt::format("cuda:{}", index);
    const cuda::AllocatorStats stats = cuda::runtime().allocator_stats(index);
    s.allocated = stats.allocated;
    s.allocated_peak = stats.allocated_peak;
    s.reserved = stats.reserved;
    s.reserved_peak = stats.reserved_peak;
    s.active = stats.active;
    s.active_peak = stats.active_peak;
    s.tracked = true;
    return s;
  }
  s.device = "cpu";
  s.tracked = cpu_tracking_installed();
  const CpuCounters c = cpu_counters();
  s.allocated = s.reserved = s.active = c.current_bytes;
  s.allocated_peak = s.reserved_peak = s.active_peak = c.peak_bytes;
  return s;
}

void reset_peaks(const c10::Device& device) {
  if (cuda_device(device)) {
    cuda::runtime().reset_peak_stats(device.has_index() ? device.index() : 0);
  } else {
    reset_cpu_peak();
  }
}

void start_history(const c10::Device& device) {
  if (!device.is_cuda()) return;
  cuda::runtime().record_history();
}

std::string history_snapshot(const c10::Device& device) {
  if (!device.is_cuda()) return {};
  return cuda::runtime().history_snapshot();
}

void empty_cache(const c10::Device& device) {
  if (cuda_device(device)) cuda::runtime().empty_cache();
}

int64_t memory_limit(const c10::Device& device, int64_t budget) {
  if (cuda_device(device)) {
    return cuda::runtime().properties(device.index()).total_bytes;
  }
  if (budget > 0) return budget;
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", b / 1024);
  return fmt::format("{} B", bytes);
}

std::string summary_table(const MemorySnapshot& s) {
  std::string out = fmt::format("memory summary ({})\n", s.device);
  out += fmt::format("  {:<28} {:>14} {:>14}\n", "", "current", "peak");
  auto row = [&](const char* name, int64_t cur, int64_t peak) {
    out += fmt::format("  {:<28} {:>14} {:>14}\n", name, format_bytes(cur), format_bytes(peak));
  };
  row("allocated (tensors)", s.allocated, s.allocated_peak);
  if (s.device != "cpu") {
    row("reserved (allocator cache)", s.reserved, s.reserved_peak);
    row("active", s.active, s.active_peak);
    row("fragmentation (res - alloc)", s.reserved - s.allocated, s.reserved_peak - s.allocated_peak);
  }
  row("host resident (RSS)", s.host_rss, s.host_rss_peak);
  if (!s.tracked) out += "  (CPU tensor bytes are not tracked: tracking allocator not installed)\n";
  return out;
}

}  // namespace frugal::memory
