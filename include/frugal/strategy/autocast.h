// RAII autocast scope for one device type (CUDA or CPU), restoring the previous state on
// exit. Autocast state is thread-local in ATen, so the guard affects only the calling
// thread; backward runs outside it (autograd replays the casts recorded in forward).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace frugal {

class AutocastGuard {
 public:
  // enabled = false makes a no-op guard, so callers need no branches.
  AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool active_;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace frugal
