#include "frugal/engine/device.h"

#include <ATen/Context.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

#include "frugal/util/error.h"

namespace frugal {

c10::Device resolve_device(const std::string& spec, int local_rank) {
  const bool cuda = at::globalContext().hasCUDA();
  const auto local = static_cast<c10::DeviceIndex>(local_rank);
  if (spec == "auto" && !cuda) return c10::Device(c10::kCPU);
  if (spec == "cpu") return c10::Device(c10::kCPU);
  if (spec != "auto" && spec.rfind("cuda", 0) != 0) {
    throw Error(fmt::format("run.device: unknown device '{}' (expected auto, cpu, cuda or cuda:N)",
                            spec));
  }
  if (!cuda) {
    throw Error(fmt::format("run.device: '{}' asked for, but this process sees no CUDA device "
                            "(use auto or cpu)", spec));
  }
  c10::Device device(spec == "auto" ? "cuda" : spec);
  if (!device.has_index()) device.set_index(local);
  const auto count = c10::impl::getDeviceGuardImpl(c10::kCUDA)->deviceCount();
  if (device.index() >= count) {
    throw Error(fmt::format("run.device: '{}' asked for, but this process sees {} CUDA device(s)",
                            spec, count));
  }
  return device;
}

}  // namespace frugal
