#include <ATen/ATen.h>
#include <fmt/format.h>

#include <bit>
#include <nlohmann/json.hpp>

#include "cpu_tensor.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/safetensors.h"
#include "frugal/util/error.h"
#include "safetensors_dtype.h"

namespace frugal::io {

// The format stores little-endian bytes and frugal writes tensor memory as it is.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

void write_safetensors(const std::filesystem::path& path, const NamedTensors& named,
                       const std::map<std::string, std::string>& metadata) {
  NamedTensors cpu = detail::standalone_cpu_all(named);
  // ordered_json: the header lists tensors in the caller's order, the order of their bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : cpu) {
    if (name == "__metadata__") {
      throw Error(fmt::format("cannot write '{}': '__metadata__' is reserved, not a tensor name",
                              path.string()));
    }
    auto dtype = detail::safetensors_dtype_name(tensor.scalar_type());
    if (!dtype) {
      throw Error(
          fmt::format("cannot write '{}': tensor '{}' has dtype {}, which safetensors "
                      "cannot store",
                      path.string(), name, c10::toString(tensor.scalar_type())));
    }
    uint64_t end = offset + tensor.nbytes();
    header[name] = {
        {"dtype", *dtype}, {"shape", tensor.sizes().vec()}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  // Padding to a multiple of 8 puts the data on an 8-byte boundary (mmap readers want that).
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t length = json.size();  // little-endian already (static_assert above)
  std::vector<std::string_view> parts{
      std::string_view(reinterpret_cast<const char*>(&length), sizeof length), json};
  for (const auto& [name, tensor] : cpu) parts.push_back(detail::raw_bytes(tensor));
  write_file_atomic_parts(path, parts);
}

}  // namespace frugal::io
