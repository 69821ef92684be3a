// The `text` data type: files of bytes, one token per byte.
#include "frugal/data/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "files.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "io/mapped_file.h"

namespace frugal {

namespace {

bool has_nul(const detail::MappedFile& file) {
  return file.size() > 0 && std::memchr(file.data(), 0, static_cast<size_t>(file.size()));
}

bool skipped_name(const std::string& name) {
  auto ends_with = [&](const char* suffix) { return name.ends_with(suffix); };
  return name.starts_with(".") || ends_with(".dat") || ends_with(".u8");
}

// Maps each text file under `path`; binary files in a directory are skipped, an explicit
// binary file is an error (most likely a token shard given to data.type: text).
std::vector<std::shared_ptr<const detail::MappedFile>> map_text_files(const std::string& path,
                                                                      const std::string& key) {
  if (!detail::is_directory(path)) {
    auto file = detail::MappedFile::open(path, key);
    if (has_nul(*file)) {
      throw Error(
          fmt::format("{}: '{}' contains NUL bytes: not a text file (token shards are "
                      "data.type: tokens)",
                      key, path));
    }
    return {file};
  }
  std::vector<std::string> names = detail::regular_files(path, key);
  std::erase_if(names,
                [](const std::string& name) { return skipped_name(detail::file_name(name)); });
  std::vector<std::shared_ptr<const detail::MappedFile>> files;
  for (const std::string& name : names) {
    auto file = detail::MappedFile::open(name, key);
    if (has_nul(*file)) {
      log::debug(fmt::format("{}: skipping '{}' (binary: contains NUL bytes)", key, name));
      continue;
    }
    files.push_back(std::move(file));
  }
  if (files.empty()) throw Error(fmt::format("{}: no text files in directory '{}'", key, path));
  return files;
}

}  // namespace

std::vector<std::string> list_text_files(const std::string& path, const std::string& key) {
  std::vector<std::string> paths;
  for (const auto& file : map_text_files(path, key)) paths.push_back(file->path());
  return paths;
}

TokenStream open_text_files(const std::string& path, const std::string& key) {
  std::vector<TokenStream::Shard> shards;
  for (auto& file : map_text_files(path, key)) {
    if (file->size() == 0) continue;
    const uint8_t* bytes = file->data();
    int64_t size = file->size();
    std::string name = file->path();
    shards.push_back({std::move(file), std::move(name), bytes, size, 1});
  }
  return TokenStream(std::move(shards));
}

}  // namespace frugal
