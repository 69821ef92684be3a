#include "frugal/io/pending_tensors.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_set>

#include "cpu_tensor.h"
#include "frugal/util/error.h"

namespace frugal::io {

int64_t PendingTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t PendingTensor::nbytes() const {
  return numel() * static_cast<int64_t>(c10::elementSize(dtype));
}

PendingTensors pending(const NamedTensors& named) {
  detail::check_names(named);
  PendingTensors out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) {
    detail::check_savable(t, name);
    out.push_back({name, t.sizes().vec(), t.scalar_type(), [value = t] { return value; }});
  }
  return out;
}

void check_pending_names(const PendingTensors& tensors) {
  std::unordered_set<std::string_view> seen;
  for (const PendingTensor& p : tensors) {
    if (p.name.empty()) throw Error("cannot save a tensor with an empty name");
    if (!seen.insert(p.name).second) {
      throw Error(fmt::format("cannot save tensors: the name '{}' appears twice", p.name));
    }
  }
}

at::Tensor read_standalone(const PendingTensor& p, const std::string& what) {
  at::Tensor t = detail::standalone_cpu(p.read(), p.name);
  if (t.sizes().vec() != p.shape || t.scalar_type() != p.dtype) {
    throw Error(fmt::format("{}: tensor '{}' read as {} [{}], announced as {} [{}]", what, p.name,
                            c10::toString(t.scalar_type()), fmt::join(t.sizes(), ", "),
                            c10::toString(p.dtype), fmt::join(p.shape, ", ")));
  }
  return t;
}

NamedTensors read_all(const PendingTensors& tensors, const std::string& what) {
  NamedTensors out;
  out.reserve(tensors.size());
  for (const PendingTensor& p : tensors) out.emplace_back(p.name, read_standalone(p, what));
  return out;
}

}  // namespace frugal::io
