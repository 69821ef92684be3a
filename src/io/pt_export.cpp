#include "frugal/io/pt_export.h"

#include <ATen/ATen.h>
#include <c10/util/strides.h>
#include <fmt/format.h>

#include "cpu_tensor.h"
#include "frugal/io/atomic_file.h"
#include "frugal/util/error.h"
#include "torch_archive.h"

namespace frugal::io {
namespace {

// The C++ pickler names a storage "torch.<Type>Storage"; Python has such classes only for these
// dtypes. Newer ones (uint16/32/64, float8) are saved by Python as UntypedStorage plus a dtype,
// which the C++ pickler cannot write, so they are refused here rather than written unreadable.
bool python_has_storage_class(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kLong:
    case at::kInt:
    case at::kShort:
    case at::kChar:
    case at::kByte:
    case at::kBool:
    case at::kComplexFloat:
    case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

}  // namespace

void write_pt(const std::filesystem::path& path, const PendingTensors& tensors) {
  check_pending_names(tensors);
  // The pickle first, from stand-ins with each tensor's shape and a storage of its size but no
  // memory (the pickler reads neither); then each value read and written as its storage's
  // record, one at a time.
  c10::Dict<std::string, at::Tensor> dict;
  for (const PendingTensor& p : tensors) {
    if (!python_has_storage_class(p.dtype)) {
      throw Error(
          fmt::format("cannot export '{}' to '{}': dtype {} is not supported in .pt files "
                      "(use safetensors)",
                      p.name, path.string(), c10::toString(p.dtype)));
    }
    at::Storage storage(at::Storage::use_byte_size_t(), static_cast<size_t>(p.nbytes()),
                        at::DataPtr(nullptr, at::Device(at::kCPU)), /*allocator=*/nullptr,
                        /*resizable=*/false);
    at::Tensor stand_in = at::empty({0}, at::TensorOptions().dtype(p.dtype));
    stand_in.set_(storage, 0, p.shape, c10::contiguous_strides(p.shape));
    dict.insert(p.name, stand_in);
  }
  std::vector<at::Tensor> storages;
  const std::string pickle = detail::torch_pickle(c10::IValue(dict), &storages);
  if (storages.size() != tensors.size()) {
    throw std::logic_error("write_pt: one storage per tensor expected");
  }
  at::Tensor current;  // the value being written
  write_file_atomic_stream(path, [&](const ByteSink& write) {
    detail::write_torch_archive(
        pickle, storages.size(),
        [&](size_t i) {
          current = read_standalone(tensors[i], path.string());
          return detail::raw_bytes(current);
        },
        write);
  });
}

void write_pt(const std::filesystem::path& path, const NamedTensors& named) {
  write_pt(path, pending(detail::standalone_cpu_all(named)));
}

}  // namespace frugal::io
