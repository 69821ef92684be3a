// Weights for Python: a file `torch.load(path)` reads (with its default weights_only=True) as a
// plain dict name -> tensor, in the given order, on the CPU. It is torch.save's own zip format;
// see docs/formats.md. Written atomically.
#pragma once

#include <filesystem>

#include "frugal/io/named_tensors.h"
#include "frugal/io/pending_tensors.h"

namespace frugal::io {

// Tensors are saved as contiguous CPU copies; names must be unique (frugal::Error otherwise).
void write_pt(const std::filesystem::path& path, const NamedTensors& named);
// The same from tensors read when their turn comes, one at a time (io/pending_tensors.h).
void write_pt(const std::filesystem::path& path, const PendingTensors& tensors);

}  // namespace frugal::io
