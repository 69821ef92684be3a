#include "cpu_tensor.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <unordered_set>

#include "frugal/util/error.h"

namespace frugal::io::detail {

void check_savable(const at::Tensor& t, const std::string& name) {
  if (!t.defined()) throw Error(fmt::format("cannot save tensor '{}': it is undefined", name));
  if (t.layout() != at::kStrided || t.is_quantized() || t.is_meta()) {
    throw Error(
        fmt::format("cannot save tensor '{}': only dense tensors with data can be saved", name));
  }
}

void check_names(const NamedTensors& named) {
  std::unordered_set<std::string_view> seen;
  for (const auto& [name, tensor] : named) {
    if (name.empty()) throw Error("cannot save a tensor with an empty name");
    if (!seen.insert(name).second) {
      throw Error(fmt::format("cannot save tensors: the name '{}' appears twice", name));
    }
  }
}

at::Tensor standalone_cpu(const at::Tensor& t, const std::string& name) {
  check_savable(t, name);
  // resolve_conj/neg: lazily conjugated or negated views must be written as their values.
  at::Tensor cpu = t.detach().resolve_conj().resolve_neg().to(at::kCPU);
  bool owns_storage =
      cpu.is_contiguous() && cpu.storage_offset() == 0 && cpu.storage().nbytes() == cpu.nbytes();
  return owns_storage ? cpu : cpu.clone(at::MemoryFormat::Contiguous);
}

std::string_view raw_bytes(const at::Tensor& t) {
  return {static_cast<const char*>(t.const_data_ptr()), t.nbytes()};
}

NamedTensors standalone_cpu_all(const NamedTensors& named) {
  check_names(named);
  NamedTensors out;
  out.reserve(named.size());
  for (const auto& [name, tensor] : named) out.emplace_back(name, standalone_cpu(tensor, name));
  return out;
}

}  // namespace frugal::io::detail
