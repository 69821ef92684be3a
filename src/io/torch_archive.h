// Private to src/io: torch's serialization container (the format of torch.save since 1.6): a
// zip archive holding data.pkl (a pickle whose tensors point at storages by key) and one record
// data/<key> per storage, plus version and byteorder records.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>

namespace frugal::io::detail {

// Archives `value` with plain pickle containers: dicts and lists carry no TorchScript type tag
// (torch::pickle_save adds torch.jit._pickle.restore_type_tag, which Python's torch.load refuses
// under its default weights_only=True). Tensors must be CPU; int/float/bool lists are not
// supported by weights_only loading either, so callers use strings and dicts.
std::string torch_archive(const c10::IValue& value);

// Reads an archive written by torch_archive, torch::pickle_save or Python's torch.save, tensors
// on the CPU. Anything unreadable throws frugal::Error("<what>: corrupt or truncated tensor
// data (<reason>)").
c10::IValue read_torch_archive(std::string_view bytes, const std::string& what);

// The frugal::Error read_torch_archive throws, for callers that find the content wrong.
[[noreturn]] void throw_corrupt(const std::string& what, std::string_view reason);

}  // namespace frugal::io::detail
