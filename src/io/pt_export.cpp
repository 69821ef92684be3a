#include "frugal/io/pt_export.h"

#include <ATen/ATen.h>
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

void write_pt(const std::filesystem::path& path, const NamedTensors& named) {
  c10::Dict<std::string, at::Tensor> dict;
  for (auto& [name, tensor] : detail::standalone_cpu_all(named)) {
    if (!python_has_storage_class(tensor.scalar_type())) {
      throw Error(
          fmt::format("cannot export '{}' to '{}': dtype {} is not supported in .pt files "
                      "(use safetensors)",
                      name, path.string(), c10::toString(tensor.scalar_type())));
    }
    dict.insert(name, tensor);
  }
  write_file_atomic(path, detail::torch_archive(c10::IValue(dict)));
}

}  // namespace frugal::io
