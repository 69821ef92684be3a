#include "frugal/engine/state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "frugal/util/error.h"

namespace frugal {

NamedTensors rng_state() {
  NamedTensors out;
  out.emplace_back("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
  if (at::globalContext().hasCUDA()) {
    const auto n = at::detail::getCUDAHooks().deviceCount();
    for (c10::DeviceIndex d = 0; d < n; ++d) {
      out.emplace_back(fmt::format("rng.cuda.{}", d),
                       at::globalContext().defaultGenerator(at::Device(at::kCUDA, d)).get_state());
    }
  }
  return out;
}

void load_rng_state(const NamedTensors& state) {
  for (const auto& [name, t] : state) {
    if (name == "rng.cpu") {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // shares the global state
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(t);
    } else if (name.rfind("rng.cuda.", 0) == 0 && at::globalContext().hasCUDA()) {
      const auto d = static_cast<c10::DeviceIndex>(std::stoi(name.substr(9)));
      if (d < at::detail::getCUDAHooks().deviceCount()) {
        at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, d));
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(t);
      }
    }
  }
}

}  // namespace frugal
