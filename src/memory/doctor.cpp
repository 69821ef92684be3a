#include "frugal/memory/doctor.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "cuda/cuda_runtime.h"

extern char** environ;

namespace frugal::memory {
namespace {

namespace fs = std::filesystem;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<int64_t> read_int(const fs::path& p) {
  auto s = read_text(p);
  if (!s) return std::nullopt;
  try {
    return std::stoll(*s);
  } catch (...) {
    return std::nullopt;
  }
}

// /proc/meminfo: "MemTotal:  32768000 kB" -> bytes by key.
std::map<std::string, int64_t> meminfo(const fs::path& root) {
  std::map<std::string, int64_t> out;
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    if (ls >> key >> value) {
      if (!key.empty() && key.back() == ':') key.pop_back();
      ls >> unit;
      out[key] = unit == "kB" ? value * 1024 : value;
    }
  }
  return out;
}

std::string gib(int64_t bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

Finding missing(const std::string& name, const fs::path& file) {
  return {name, "unknown", Verdict::info, "could not read " + file.string()};
}

Finding memory_finding(const std::map<std::string, int64_t>& m) {
  if (!m.count("MemTotal")) return {"host memory", "unknown", Verdict::info, "no MemTotal in /proc/meminfo"};
  const int64_t total = m.at("MemTotal");
  const int64_t avail = m.count("MemAvailable") ? m.at("MemAvailable") : m.count("MemFree") ? m.at("MemFree") : 0;
  Finding f{"host memory", fmt::format("{} available of {}", gib(avail), gib(total))};
  if (avail < total / 10) {
    f.verdict = Verdict::warn;
    f.advice = "less than 10% of host memory is available: offload, pinned buffers and data "
               "workers will compete for it; stop other jobs or lower data.num_workers";
  }
  return f;
}

Finding swap_finding(const std::map<std::string, int64_t>& m) {
  const int64_t total = m.count("SwapTotal") ? m.at("SwapTotal") : 0;
  const int64_t free = m.count("SwapFree") ? m.at("SwapFree") : 0;
  if (total == 0) {
    return {"swap", "none", Verdict::info,
            "no swap: when host memory runs out the kernel's OOM killer ends the run at once "
            "(set memory.budget to fail cleanly first)"};
  }
  Finding f{"swap", fmt::format("{} used of {}", gib(total - free), gib(total))};
  if (total - free > total / 2) {
    f.verdict = Verdict::warn;
    f.advice = "more than half the swap is in use: training that pages is many times slower; "
               "free host memory or lower offload / data workers";
  }
  return f;
}

// A vm.* setting from /proc/sys/vm/<key>; `judge` sets the verdict and advice from its value.
Finding vm_setting(const fs::path& root, const std::string& key, const std::string& unit,
                   const std::function<void(int64_t, Finding&)>& judge) {
  const std::string name = "vm." + key;
  const fs::path file = root / "proc/sys/vm" / key;
  auto v = read_int(file);
  if (!v) return missing(name, file);
  Finding f{name, std::to_string(*v) + unit};
  judge(*v, f);
  return f;
}

Finding swappiness_finding(const fs::path& root) {
  return vm_setting(root, "swappiness", "", [](int64_t v, Finding& f) {
    if (v <= 60) return;
    f.verdict = Verdict::warn;
    f.advice = "the kernel swaps eagerly: `sysctl vm.swappiness=10` keeps training memory "
               "(pinned buffers, offloaded state) resident";
  });
}

Finding overcommit_finding(const fs::path& root) {
  return vm_setting(root, "overcommit_memory", "", [](int64_t v, Finding& f) {
    if (v != 2) return;
    f.verdict = Verdict::warn;
    f.advice = "strict accounting (2): large reservations (CUDA's host mappings, memory-mapped "
               "datasets) can fail although memory is free; 0 (the default) is what PyTorch "
               "expects";
  });
}

Finding min_free_finding(const fs::path& root, int64_t total) {
  return vm_setting(root, "min_free_kbytes", " KiB", [total](int64_t v, Finding& f) {
    // Large hosts with a tiny reserve stall in direct reclaim when pinned allocations burst.
    if (total <= 0 || v * 1024 >= total / 1000 || v >= 1048576) return;
    f.verdict = Verdict::info;
    f.advice = fmt::format("below 0.1% of host memory: on hosts that pin a lot of memory "
                           "`sysctl vm.min_free_kbytes={}` avoids allocation stalls",
                           std::min<int64_t>(total / 1024 / 1000, 1048576));
  });
}

Finding thp_finding(const fs::path& root) {
  const fs::path file = root / "sys/kernel/mm/transparent_hugepage/enabled";
  auto v = read_text(file);
  if (!v) return missing("transparent huge pages", file);
  // "always [madvise] never": the bracketed word is the setting.
  std::string mode = *v;
  const auto open = v->find('['), close = v->find(']');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    mode = v->substr(open + 1, close - open - 1);
  }
  Finding f{"transparent huge pages", mode};
  if (mode == "never") {
    f.verdict = Verdict::warn;
    f.advice = "large CPU tensors (offloaded state, pinned buffers) get 4 KiB pages and more TLB "
               "misses; `madvise` lets PyTorch ask for huge pages where it helps";
  }
  return f;
}

Finding memlock_finding(const fs::path& root) {
  // /proc/self/limits: "Max locked memory   8388608   8388608   bytes"
  const fs::path file = root / "proc/self/limits";
  std::ifstream in(file);
  if (!in) return missing("locked memory limit", file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max locked memory", 0) != 0) continue;
    std::istringstream ls(line.substr(17));
    std::string soft;
    ls >> soft;
    if (soft == "unlimited") return {"locked memory limit", "unlimited"};
    int64_t bytes = 0;
    try {
      bytes = std::stoll(soft);
    } catch (...) {
      return missing("locked memory limit", file);
    }
    Finding f{"locked memory limit", fmt::format("{} MiB", bytes / (1024 * 1024))};
    if (bytes < 64LL * 1024 * 1024) {
      f.verdict = Verdict::warn;
      f.advice = "pinned host memory (strategy.offload, data.pin_memory, NCCL) may fail or fall "
                 "back to pageable copies: raise it (`ulimit -l unlimited`, or memlock in "
                 "/etc/security/limits.conf)";
    }
    return f;
  }
  return missing("locked memory limit", file);
}

Finding shm_finding(const fs::path& root) {
  // The size from the mount table when given (size=...k), else the filesystem's.
  int64_t bytes = -1;
  std::ifstream mounts(root / "proc/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream ls(line);
    std::string dev, point, type, opts;
    if (!(ls >> dev >> point >> type >> opts) || point != "/dev/shm") continue;
    const auto at = opts.find("size=");
    if (at == std::string::npos) break;
    const std::string size = opts.substr(at + 5, opts.find(',', at) - at - 5);
    try {
      bytes = std::stoll(size);
      const char unit = size.empty() ? ' ' : size.back();
      if (unit == 'k') bytes *= 1024;
      if (unit == 'm') bytes *= 1024 * 1024;
      if (unit == 'g') bytes *= 1024LL * 1024 * 1024;
    } catch (...) {
      bytes = -1;
    }
    break;
  }
  if (bytes < 0) {
    struct statvfs st {};
    if (statvfs((root / "dev/shm").c_str(), &st) != 0) return missing("/dev/shm", root / "dev/shm");
    bytes = static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize);
  }
  Finding f{"/dev/shm", gib(bytes)};
  if (bytes < 1024LL * 1024 * 1024) {
    f.verdict = Verdict::warn;
    f.advice = "under 1 GiB: data loader workers and NCCL's shared-memory transport use it; "
               "in containers pass --shm-size=8g (docker) or mount a larger tmpfs";
  }
  return f;
}

Finding cpu_finding(const fs::path& root, int omp_threads) {
  std::ifstream in(root / "proc/cpuinfo");
  int cores = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("processor", 0) == 0) ++cores;
  }
  if (cores == 0) return missing("CPU cores / threads", root / "proc/cpuinfo");
  Finding f{"CPU cores / threads", fmt::format("{} cores, {} OpenMP threads", cores, omp_threads)};
  if (omp_threads > cores) {
    f.verdict = Verdict::warn;
    f.advice = "more threads than cores: set OMP_NUM_THREADS (or run.threads) to the cores per "
               "rank, or each rank's threads will fight over them";
  }
  return f;
}

std::vector<Finding> gpu_findings(const Probe& p) {
  std::vector<Finding> out;
  if (p.cuda_load_failed) {
    out.push_back({"CUDA libraries", p.cuda_libraries, Verdict::bad,
                   "this process cannot use a GPU: see that libfrugal_cuda.so and torch's CUDA "
                   "libraries are found (docs/gpu.md, \"Loading CUDA\")"});
  } else {
    const bool loaded = !p.cuda_runtime.empty();
    out.push_back({"CUDA libraries",
                   loaded ? p.cuda_libraries + ", CUDA runtime " + p.cuda_runtime : p.cuda_libraries,
                   loaded ? Verdict::ok : Verdict::info});
  }
  if (p.gpus.empty()) {
    out.push_back({"GPUs", "none visible", Verdict::info,
                   p.env.count("CUDA_VISIBLE_DEVICES")
                       ? "CUDA_VISIBLE_DEVICES=" + p.env.at("CUDA_VISIBLE_DEVICES") + " hides them?"
                       : "training runs on the CPU (run.device: auto)"});
    return out;
  }
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    out.push_back({fmt::format("GPU {}", i),
                   fmt::format("{}, {} (CUDA runtime {}, driver {})", p.gpus[i].name,
                               gib(p.gpus[i].total_bytes), p.cuda_runtime, p.cuda_driver)});
  }
  return out;
}

std::vector<Finding> nccl_findings(const Probe& p) {
  std::vector<Finding> out;
  for (const auto& [key, value] : p.env) {
    if (key.rfind("NCCL_", 0) != 0) continue;
    Finding f{key, value, Verdict::info};
    if ((key == "NCCL_P2P_DISABLE" || key == "NCCL_IB_DISABLE" || key == "NCCL_SHM_DISABLE") &&
        value == "1") {
      f.verdict = Verdict::warn;
      f.advice = "disables a fast transport: collectives fall back to slower paths; unset it "
                 "unless it works around a known fault";
    }
    out.push_back(f);
  }
  if (out.empty()) out.push_back({"NCCL environment", "no NCCL_* variables set"});
  return out;
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::info: return "info";
    case Verdict::warn: return "warn";
    case Verdict::bad: return "bad";
  }
  return "?";
}

Probe probe_process() {
  Probe p;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    if (key.rfind("NCCL_", 0) == 0 || key == "OMP_NUM_THREADS" || key == "CUDA_VISIBLE_DEVICES") {
      p.env[key] = kv.substr(eq + 1);
    }
  }
  p.omp_threads = at::get_num_threads();
  const cuda::LoadState& cuda_state = cuda::load_state();
  p.cuda_libraries = cuda_state.detail;
  p.cuda_load_failed = cuda_state.failed;
  if (!cuda_state.loaded) return p;
  // Asked of torch's CUDA hooks, which only its loaded CUDA library answers (its stand-in
  // throws): the runtime's version, GPU or not.
  const auto& hooks = at::detail::getCUDAHooks();
  auto version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  p.cuda_runtime = version(static_cast<int>(hooks.versionCUDART()));
  if (at::globalContext().hasCUDA()) {
    const int n = hooks.deviceCount();
    for (int i = 0; i < n; ++i) {
      const cuda::DeviceProperties prop = cuda::runtime().properties(static_cast<c10::DeviceIndex>(i));
      p.gpus.push_back({prop.name, prop.total_bytes});
    }
    if (const int driver = cuda::runtime().driver_version(); driver > 0) p.cuda_driver = version(driver);
  }
  return p;
}

std::vector<Finding> diagnose(const fs::path& root, const Probe& probe) {
  const auto mem = meminfo(root);
  std::vector<Finding> out;
  out.push_back(memory_finding(mem));
  out.push_back(swap_finding(mem));
  out.push_back(swappiness_finding(root));
  out.push_back(overcommit_finding(root));
  out.push_back(min_free_finding(root, mem.count("MemTotal") ? mem.at("MemTotal") : 0));
  out.push_back(thp_finding(root));
  out.push_back(memlock_finding(root));
  out.push_back(shm_finding(root));
  out.push_back(cpu_finding(root, probe.omp_threads));
  for (auto& f : gpu_findings(probe)) out.push_back(std::move(f));
  for (auto& f : nccl_findings(probe)) out.push_back(std::move(f));
  return out;
}

}  // namespace frugal::memory
