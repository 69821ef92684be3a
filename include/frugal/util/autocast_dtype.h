// The dtype autocast runs lower-precision ops (matmuls, attention) in, for frugal's own code
// that must know it (a custom autograd function, a table computed once) or do the cast itself.
//
// Meta tensors have no autocast of their own (ATen's autocast skips them): they follow the
// CPU's autocast state, which the planner's traced step (memory/meta_trace.h) turns on to
// stand for the run's, and frugal's matmul-like calls cast their meta inputs as ATen's
// autocast casts real ones. The trace then holds the copies the run holds: a linear layer's
// input and weight in the low dtype beside the fp32 residual stream.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <optional>

namespace frugal {

// The autocast dtype of `device` (meta: the CPU's), none when autocast is off there.
std::optional<at::ScalarType> autocast_dtype(c10::DeviceType device);

// `t` as autocast would hand it to a lower-precision op: a meta floating-point tensor under
// the CPU's autocast is cast to its dtype; anything else is returned as it is (ATen's
// autocast casts real tensors itself).
at::Tensor autocast_meta_input(const at::Tensor& t);

}  // namespace frugal
