// Tensors known by name, shape and dtype before their values are read. The writers that take
// them (safetensors, .pt, Hugging Face folders) write the header from what is announced, then
// read one tensor, write it and let it go: exporting a model holds its largest tensor and the
// readers' buffers, never the model.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "frugal/io/named_tensors.h"

namespace frugal::io {

struct PendingTensor {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  // The value, in `shape` and `dtype` (on any device, any strides); called once per write.
  std::function<at::Tensor()> read;

  int64_t numel() const;
  int64_t nbytes() const;
};
using PendingTensors = std::vector<PendingTensor>;

// Tensors already in memory, announced as they are (the names checked: non-empty, unique).
PendingTensors pending(const NamedTensors& named);

// frugal::Error unless every name is non-empty and unique.
void check_pending_names(const PendingTensors& tensors);

// p.read() as a contiguous CPU tensor that owns its storage (what a file holds), after
// checking it is what was announced: a frugal::Error naming `what` and the tensor otherwise.
at::Tensor read_standalone(const PendingTensor& p, const std::string& what);

// Every value read, in order (for writers that need them all at once).
NamedTensors read_all(const PendingTensors& tensors, const std::string& what);

}  // namespace frugal::io
