#include "frugal/data/batch.h"

#include <ATen/ATen.h>

namespace frugal {

namespace {
at::Tensor moved(const at::Tensor& t, const c10::Device& device, bool non_blocking) {
  return t.defined() ? t.to(device, non_blocking) : t;
}
at::Tensor row_range(const at::Tensor& t, int64_t first, int64_t count) {
  return t.defined() ? t.narrow(0, first, count) : t;
}
at::Tensor column_range(const at::Tensor& t, int64_t count) {
  return t.defined() ? t.narrow(1, 0, count) : t;
}
}  // namespace

int64_t Batch::num_targets() const {
  if (!y.defined()) return 0;
  if (at::isFloatingType(y.scalar_type())) return y.numel();
  return (y != kIgnoreIndex).sum().item<int64_t>();
}

Batch Batch::to(const c10::Device& device, bool non_blocking) const {
  return {moved(x, device, non_blocking), moved(y, device, non_blocking),
          moved(attention_mask, device, non_blocking), moved(position_ids, device, non_blocking),
          parts};
}

Batch Batch::rows(int64_t first, int64_t count) const {
  return {row_range(x, first, count), row_range(y, first, count),
          row_range(attention_mask, first, count), row_range(position_ids, first, count)};
}

Batch Batch::columns(int64_t positions) const {
  return {column_range(x, positions), column_range(y, positions),
          column_range(attention_mask, positions), column_range(position_ids, positions)};
}

}  // namespace frugal
