// Named tensors <-> bytes, for checkpoints. The bytes are torch's own serialization
// (torch::pickle_save: a zip archive holding a pickle and one record per storage), so Python's
// torch.load reads them too; see docs/formats.md for the layout and its integrity checks.
#pragma once

#include <string>
#include <string_view>

#include "frugal/io/named_tensors.h"

namespace frugal::io {

// Saves contiguous CPU copies (detached), bit for bit, in the given order. Names must be unique
// and tensors defined and strided (frugal::Error otherwise).
std::string save_tensors(const NamedTensors& named);

// The tensors save_tensors saved, in the same order, on the CPU. Corrupt or truncated bytes
// throw frugal::Error("<what_for_errors>: corrupt or truncated tensor data (...)"), never
// crash. Also reads a plain dict name -> tensor written by Python's torch.save (unchecked; a
// dict, e.g. dict(model.state_dict()): torch's C++ unpickler cannot rebuild the OrderedDict
// that state_dict() returns, and that is reported as a frugal::Error too).
NamedTensors load_tensors(std::string_view bytes, const std::string& what_for_errors);

}  // namespace frugal::io
