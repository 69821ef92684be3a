// Loads libfrugal_tensorboard_events.so beside libfrugal (events.h says why apart, and why
// RTLD_DEEPBIND).
#include <dlfcn.h>
#include <fmt/format.h>

#include <filesystem>

#include "frugal/util/error.h"
#include "util/beside_libfrugal.h"
#include "train/tensorboard/events.h"

namespace frugal::tb_events {

const Table& table() {
  static const Table* loaded = [] {
    const std::filesystem::path file = beside_libfrugal("libfrugal_tensorboard_events.so");
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      throw Error(fmt::format("TensorBoard: cannot load '{}': {}", file.string(), dlerror()));
    }
    using Entry = const Table* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "frugal_tensorboard_events_v1"));
    if (entry == nullptr) {
      throw Error(fmt::format("TensorBoard: '{}' has no frugal_tensorboard_events_v1", file.string()));
    }
    return entry();  // never unloaded: the table lives as long as the process
  }();
  return *loaded;
}

}  // namespace frugal::tb_events
