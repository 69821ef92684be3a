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

void write_safetensors(const std::filesystem::path& path, const PendingTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_pending_names(tensors);
  // ordered_json: the header lists tensors in the caller's order, the order of their bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const PendingTensor& p : tensors) {
    if (p.name == "__metadata__") {
      throw Error(fmt::format("cannot write '{}': '__metadata__' is reserved, not a tensor name",
                              path.string()));
    }
    auto dtype = detail::safetensors_dtype_name(p.dtype);
    if (!dtype) {
      throw Error(
          fmt::format("cannot write '{}': tensor '{}' has dtype {}, which safetensors "
                      "cannot store",
                      path.string(), p.name, c10::toString(p.dtype)));
    }
    const uint64_t end = offset + static_cast<uint64_t>(p.nbytes());
    header[p.name] = {{"dtype", *dtype}, {"shape", p.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  // Padding to a multiple of 8 puts the data on an 8-byte boundary (mmap readers want that).
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t length = json.size();  // little-endian already (static_assert above)
  write_file_atomic_stream(path, [&](const ByteSink& write) {
    write(std::string_view(reinterpret_cast<const char*>(&length), sizeof length));
    write(json);
    // One tensor read, written and let go at a time.
    for (const PendingTensor& p : tensors) write(detail::raw_bytes(read_standalone(p, path.string())));
  });
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& named,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, pending(detail::standalone_cpu_all(named)), metadata);
}

}  // namespace frugal::io
