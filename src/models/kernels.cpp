#include "frugal/models/kernels.h"

#include <ATen/core/grad_mode.h>

#include "frugal/util/error.h"

namespace frugal {

Kernels parse_kernels(const std::string& name, const std::string& key) {
  if (name == "auto") return Kernels::Auto;
  if (name == "aten") return Kernels::Aten;
  if (name == "frugal") return Kernels::Frugal;
  throw Error(key + ": unknown kernels '" + name + "' (expected auto, aten or frugal)");
}

bool frugal_kernels_take(const at::Tensor& t) {
  // Meta tensors (a traced step, memory/meta_trace.h) take the CPU kernels' path too, so the
  // trace allocates what they allocate: flash-style, as SDPA's CUDA kernels.
  return (t.device().is_cpu() || t.is_meta()) &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

void refuse_double_backward(const char* op) {
  if (at::GradMode::is_enabled()) {
    throw Error(std::string("frugal's ") + op + " kernel has no second derivative (backward "
                "with create_graph); use model.kernels: aten");
  }
}

}  // namespace frugal
