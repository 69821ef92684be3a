// Private to src/io: torch's serialization container (the format of torch.save since 1.6): a
// zip archive holding data.pkl (a pickle whose tensors point at storages by key) and one record
// data/<key> per storage, plus version and byteorder records.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::io::detail {

// Archives `value` with plain pickle containers: dicts and lists carry no TorchScript type tag
// (torch::pickle_save adds torch.jit._pickle.restore_type_tag, which Python's torch.load refuses
// under its default weights_only=True). Tensors must be CPU; int/float/bool lists are not
// supported by weights_only loading either, so callers use strings and dicts.
std::string torch_archive(const c10::IValue& value);

// The two halves of torch_archive, for writers that read one tensor at a time. torch_pickle:
// the pickle of `value`, whose tensors point at storages "0", "1", ... in the order met (those
// tensors are set in `storages`; their data is not read, so they may be shapes over storages
// without memory). write_torch_archive: the archive, to `out` piece by piece, with record
// data/<i> taken from storage_bytes(i) (asked in order, used before the next is asked).
std::string torch_pickle(const c10::IValue& value, std::vector<at::Tensor>* storages);
void write_torch_archive(std::string_view pickle, size_t storages,
                         const std::function<std::string_view(size_t)>& storage_bytes,
                         const std::function<void(std::string_view)>& out);

// Reads an archive written by torch_archive, torch::pickle_save or Python's torch.save, tensors
// on the CPU. Anything unreadable throws frugal::Error("<what>: corrupt or truncated tensor
// data (<reason>)").
c10::IValue read_torch_archive(std::string_view bytes, const std::string& what);

// The frugal::Error read_torch_archive throws, for callers that find the content wrong.
[[noreturn]] void throw_corrupt(const std::string& what, std::string_view reason);

}  // namespace frugal::io::detail
