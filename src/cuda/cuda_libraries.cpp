// Loads libfrugal_cuda.so (and with it torch's CUDA libraries) at libfrugal's start, where the
// machine can use them (cuda_runtime.h says why they are not linked).
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cuda/cuda_runtime.h"
#include "frugal/util/error.h"
#include "util/beside_libfrugal.h"

namespace frugal::cuda {
namespace {

struct Loaded {
  LoadState state;
  const Runtime* runtime = nullptr;
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

// The kernel module's file, or the device node a container is given: where neither exists,
// CUDA finds no device either.
bool nvidia_driver_seen() {
  return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

std::string load() {
  const std::filesystem::path file = beside_libfrugal("libfrugal_cuda.so");
  // RTLD_GLOBAL: torch's CUDA libraries join the process as if linked.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    return fmt::format("not loaded: cannot load '{}': {}", file.string(), dlerror());
  }
  auto entry = reinterpret_cast<EntryPoint>(dlsym(handle, kEntryPoint));
  if (entry == nullptr) return fmt::format("not loaded: '{}' has no {}", file.string(), kEntryPoint);
  loaded().runtime = entry();  // never unloaded: torch's kernels stay registered
  return fmt::format("loaded from '{}'", file.string());
}

// Before libfrugal's other static initializers (priority 101), and so before anything can ask
// torch about CUDA: torch looks its CUDA hooks up once, at the first question, and keeps them.
__attribute__((constructor(101))) void load_cuda_libraries() {
  LoadState& state = loaded().state;
  const char* setting = std::getenv("FRUGAL_CUDA");
  const std::string wanted = setting == nullptr ? "" : setting;
  if (wanted == "0") {
    state.detail = "not loaded (FRUGAL_CUDA=0)";
    return;
  }
  if (wanted != "1" && !nvidia_driver_seen()) {
    state.detail = "not loaded: no NVIDIA driver (neither /proc/driver/nvidia nor /dev/nvidiactl; "
                   "FRUGAL_CUDA=1 loads them anyway)";
    return;
  }
  state.detail = load();
  state.loaded = loaded().runtime != nullptr;
  state.failed = !state.loaded;
}

}  // namespace

const LoadState& load_state() { return loaded().state; }

const Runtime& runtime() {
  if (loaded().runtime == nullptr) {
    throw Error("CUDA: frugal's CUDA libraries are " + loaded().state.detail);
  }
  return *loaded().runtime;
}

}  // namespace frugal::cuda
