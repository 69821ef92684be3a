#include "frugal/engine/device.h"

#include <ATen/Context.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

#include "cuda/cuda_runtime.h"
#include "frugal/util/error.h"

namespace frugal {

c10::Device resolve_device(const std::string& spec, int local_rank) {
  if (spec == "cpu") return c10::Device(c10::kCPU);
  // The index is read here, not by c10::Device: it keeps an index in 8 bits, so "cuda:999"
  // would come back as another number (or c10's own error) instead of this file's message.
  const bool named_index = spec.rfind("cuda:", 0) == 0;
  const std::string digits = named_index ? spec.substr(5) : "";
  const bool well_formed =
      spec == "auto" || spec == "cuda" ||
      (named_index && !digits.empty() && digits.size() <= 9 &&
       digits.find_first_not_of("0123456789") == std::string::npos);
  if (!well_formed) {
    throw Error(fmt::format("run.device: unknown device '{}' (expected auto, cpu, cuda or cuda:N)",
                            spec));
  }
  const bool cuda = at::globalContext().hasCUDA();
  if (spec == "auto" && !cuda) return c10::Device(c10::kCPU);
  if (!cuda) {
    // Where loading CUDA's libraries failed, that is why (src/cuda/cuda_runtime.h).
    const cuda::LoadState& libraries = cuda::load_state();
    throw Error(fmt::format("run.device: '{}' asked for, but this process sees no CUDA device "
                            "(use auto or cpu{})", spec,
                            libraries.failed ? "; frugal's CUDA libraries are " + libraries.detail
                                             : ""));
  }
  const int64_t index = named_index ? std::stoll(digits) : local_rank;
  const auto count = c10::impl::getDeviceGuardImpl(c10::kCUDA)->deviceCount();
  if (index >= count) {
    throw Error(fmt::format("run.device: '{}' asked for, but this process sees {} CUDA device(s)",
                            spec, count));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace frugal
