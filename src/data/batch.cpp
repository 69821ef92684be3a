#include "frugal/data/batch.h"

#include <ATen/ATen.h>

namespace frugal {

int64_t Batch::num_targets() const {
  if (!y.defined()) return 0;
  if (at::isFloatingType(y.scalar_type())) return y.numel();
  return (y != kIgnoreIndex).sum().item<int64_t>();
}

}  // namespace frugal
