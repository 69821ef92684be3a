// `frugal doctor`: what on this machine decides how much fits, and whether it is set up the
// way training wants: host memory and swap, the kernel's vm.* settings, transparent huge
// pages, the locked-memory limit (pinned memory), /dev/shm, CPU cores and OpenMP threads,
// GPUs, NCCL's environment. Each finding has a verdict and, when it is not ok, what to do.
//
// Everything is read from files under a root directory ("/" on a real machine; tests point it
// at a fake /proc + /sys tree), except what only the process knows: its environment, its
// thread count and the CUDA runtime's devices (`Probe`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace frugal::memory {

enum class Verdict { ok, info, warn, bad };
const char* verdict_name(Verdict v);

struct Finding {
  std::string name;            // "swap", "vm.swappiness", ...
  std::string value;           // as read, human-readable ("16.0 GiB of 32.0 GiB free")
  Verdict verdict = Verdict::ok;
  std::string advice;          // empty when ok
};

struct GpuInfo {
  std::string name;
  int64_t total_bytes = 0;
};

// What the process itself contributes.
struct Probe {
  std::map<std::string, std::string> env;  // NCCL_*, OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES
  int omp_threads = 0;                     // ATen's intra-op threads
  std::vector<GpuInfo> gpus;
  std::string cuda_runtime;                // "13.0" where CUDA's libraries are loaded, GPU or not
  // Whether frugal loaded torch's CUDA libraries, and why not (docs/gpu.md, "Loading CUDA").
  std::string cuda_libraries;
  bool cuda_load_failed = false;  // tried (a driver was seen, or FRUGAL_CUDA=1) and failed
  std::string cuda_driver;
};

// This process's probe (environment, at::get_num_threads(), the CUDA runtime).
Probe probe_process();

// The findings, in a fixed order; files that are missing under `root` give an info finding
// saying so, never an error.
std::vector<Finding> diagnose(const std::filesystem::path& root, const Probe& probe);

}  // namespace frugal::memory
