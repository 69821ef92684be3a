#include "frugal/util/autocast_dtype.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

namespace frugal {

std::optional<at::ScalarType> autocast_dtype(c10::DeviceType device) {
  const c10::DeviceType asked = device == c10::DeviceType::Meta ? c10::DeviceType::CPU : device;
  if (!at::autocast::is_autocast_enabled(asked)) return std::nullopt;
  return at::autocast::get_autocast_dtype(asked);
}

at::Tensor autocast_meta_input(const at::Tensor& t) {
  // Autocast leaves fp64 alone, as ATen's does.
  if (!t.defined() || !t.is_meta() || !at::isFloatingType(t.scalar_type()) ||
      t.scalar_type() == at::kDouble) {
    return t;
  }
  const std::optional<at::ScalarType> dtype = autocast_dtype(c10::DeviceType::Meta);
  return dtype && *dtype != t.scalar_type() ? t.to(*dtype) : t;
}

}  // namespace frugal
