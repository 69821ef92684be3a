#include "frugal/strategy/autocast.h"

#include <ATen/autocast_mode.h>

namespace frugal {

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled)
    : device_(device), active_(enabled) {
  if (!active_) return;
  prev_enabled_ = at::autocast::is_autocast_enabled(device_);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Leaving the outermost autocast region drops the cast-weight cache, as torch.autocast's
  // __exit__ does; otherwise stale low-precision copies of updated weights would be reused.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_, prev_dtype_);
}

}  // namespace frugal
