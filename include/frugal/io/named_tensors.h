// The one shape every io format reads and writes: tensors by name, in a meaningful order
// (a module's parameter order), with PyTorch-style dotted names ("blocks.0.attn.qkv.weight").
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace frugal::io {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace frugal::io
