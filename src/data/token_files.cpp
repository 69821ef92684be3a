// Opening nanoGPT and llm.c token shards: format detection and validation.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "files.h"
#include "frugal/data/token_stream.h"
#include "frugal/util/error.h"
#include "io/mapped_file.h"

namespace frugal {

namespace {

int32_t header_field(const uint8_t* bytes, int i) {
  int32_t value;
  std::memcpy(&value, bytes + 4 * i, 4);
  return value;
}

TokenStream::Shard open_shard(const std::string& path, TokenFormat format, const std::string& key) {
  auto file = detail::MappedFile::open(path, key);
  const uint8_t* bytes = file->data();
  const int64_t size = file->size();
  if (format == TokenFormat::detect) {
    // llm.c's magic read as two uint16 tokens is (54472, 308): 54472 lies outside GPT-2's
    // vocabulary (50257), so a real nanoGPT shard is not mistaken for an llm.c one.
    bool magic = size >= 4 && (header_field(bytes, 0) == kLlmcMagic ||
                                header_field(bytes, 0) == kLlmcMagicU32);
    format = magic ? TokenFormat::llmc : TokenFormat::nanogpt;
  }
  TokenStream::Shard shard{file, path, bytes, 0, 2};
  if (format == TokenFormat::nanogpt) {
    if (size % 2 != 0) {
      throw Error(fmt::format(
          "{}: '{}': {} bytes is not a whole number of uint16 tokens (truncated nanoGPT shard?)",
          key, path, size));
    }
    shard.count = size / 2;
    return shard;
  }
  if (size < kLlmcHeaderBytes) {
    throw Error(
        fmt::format("{}: '{}': {} bytes is shorter than the {}-byte llm.c header "
                    "(truncated?)",
                    key, path, size, kLlmcHeaderBytes));
  }
  const int32_t magic = header_field(bytes, 0), version = header_field(bytes, 1);
  if (magic != kLlmcMagic && magic != kLlmcMagicU32) {
    throw Error(fmt::format("{}: '{}': bad magic {} (expected llm.c magic {} or {})", key, path,
                            magic, kLlmcMagic, kLlmcMagicU32));
  }
  const int32_t expected_version = magic == kLlmcMagic ? kLlmcVersion : kLlmcVersionU32;
  if (version != expected_version) {
    throw Error(fmt::format("{}: '{}': unsupported llm.c version {} for magic {} (expected {}: "
                            "{} tokens)",
                            key, path, version, magic, expected_version,
                            magic == kLlmcMagic ? "uint16" : "uint32"));
  }
  shard.width = magic == kLlmcMagic ? 2 : 4;
  const int64_t count = header_field(bytes, 2);
  const int64_t expected = kLlmcHeaderBytes + shard.width * count;
  if (count < 0 || size != expected) {
    throw Error(
        fmt::format("{}: '{}': llm.c header says {} tokens ({} bytes) but the file has "
                    "{} bytes (truncated?)",
                    key, path, count, expected, size));
  }
  shard.tokens = bytes + kLlmcHeaderBytes;
  shard.count = count;
  return shard;
}

}  // namespace

TokenStream open_token_files(const std::string& path, TokenFormat format, const std::string& key) {
  if (!detail::is_directory(path)) return TokenStream({open_shard(path, format, key)});
  std::vector<std::string> files = detail::regular_files(path, key);
  std::erase_if(files, [](const std::string& file) { return !file.ends_with(".bin"); });
  if (files.empty()) throw Error(fmt::format("{}: no *.bin shards in directory '{}'", key, path));
  std::vector<TokenStream::Shard> shards;
  for (const std::string& file : files) shards.push_back(open_shard(file, format, key));
  return TokenStream(std::move(shards));
}

}  // namespace frugal
