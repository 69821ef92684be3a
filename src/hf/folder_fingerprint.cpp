#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "frugal/hf/folder.h"
#include "frugal/io/hash.h"
#include "io/mapped_file.h"

namespace fs = std::filesystem;

namespace frugal::hf {
namespace {

// Whole files up to this size; larger ones by their head (the safetensors header: every
// tensor's name, dtype, shape and place), their tail and blocks spread evenly between, so that
// a multi-GiB base is fingerprinted in milliseconds at every start.
constexpr int64_t kWholeBytes = 64LL << 20;
constexpr int64_t kEndBytes = 1LL << 20;
constexpr int64_t kSampleBytes = 4096;
constexpr int64_t kSamples = 256;

std::string file_fingerprint(const fs::path& path) {
  auto file = detail::MappedFile::open(path.string(), "model.init_from");
  const auto* data = reinterpret_cast<const char*>(file->data());
  const int64_t size = file->size();
  std::uint64_t h = io::kFnv1a64Offset;
  if (size <= kWholeBytes) {
    h = io::fnv1a64(std::string_view(data, static_cast<size_t>(size)), h);
  } else {
    h = io::fnv1a64(std::string_view(data, kEndBytes), h);
    for (int64_t i = 1; i < kSamples; ++i) {
      const int64_t at = (size - kSampleBytes) / kSamples * i;
      h = io::fnv1a64(std::string_view(data + at, kSampleBytes), h);
    }
    h = io::fnv1a64(std::string_view(data + size - kEndBytes, kEndBytes), h);
  }
  return fmt::format("{} bytes {}", size, io::hex64(h));
}

}  // namespace

std::map<std::string, std::string> folder_fingerprint(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool weights = name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
    if (entry.is_regular_file() && (weights || name == "config.json" ||
                                    name == "model.safetensors.index.json")) {
      out[name] = file_fingerprint(entry.path());
    }
  }
  return out;
}

}  // namespace frugal::hf
