// Private to src/io: turning any tensor into the bytes a file holds.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>

#include "frugal/io/named_tensors.h"

namespace frugal::io::detail {

// frugal::Error naming `name` unless `t` can be saved: defined, dense, with data.
void check_savable(const at::Tensor& t, const std::string& name);
// frugal::Error unless every name is non-empty and unique.
void check_names(const NamedTensors& named);

// A detached, contiguous CPU tensor that owns exactly its own storage (offset 0, no extra
// bytes), with the same values bit for bit. Returns `t` itself (no copy) when it already is one;
// copies otherwise (device tensors, views, strided layouts), so a file never carries a view's
// whole base storage. Undefined, sparse, quantized and meta tensors throw frugal::Error naming
// `name`.
at::Tensor standalone_cpu(const at::Tensor& t, const std::string& name);

// The raw bytes of a tensor returned by standalone_cpu (native byte order).
std::string_view raw_bytes(const at::Tensor& t);

// standalone_cpu of every entry, after checking that names are non-empty and unique.
NamedTensors standalone_cpu_all(const NamedTensors& named);

}  // namespace frugal::io::detail
