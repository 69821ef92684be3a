// `frugal prepare-text`: text files -> one token shard: byte-level tokens, or a tokenizer's
// (tokenizer.json or SentencePiece; uint16, or llm.c's uint32 shards past 65536 tokens).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "files.h"
#include "frugal/data/shard_meta.h"
#include "frugal/data/text.h"
#include "frugal/data/tokenizer.h"
#include "frugal/io/atomic_file.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "io/made_folders.h"
#include "frugal/util/json_input.h"

namespace frugal {

namespace {

// Removes the temporary file unless the rename succeeded.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep) std::remove(path.c_str());
  }
};

void write_shard(const std::vector<TokenStream>& streams, int64_t total, TokenFormat format,
                 const std::string& path, const std::string& output) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("prepare-text: cannot write '{}'", path));
  if (format == TokenFormat::llmc) {
    std::vector<int32_t> header(256, 0);
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(total);
    out.write(reinterpret_cast<const char*>(header.data()), kLlmcHeaderBytes);
  }
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<int64_t> tokens;
  std::vector<uint16_t> packed;
  for (const TokenStream& stream : streams) {
    for (int64_t start = 0; start < stream.size(); start += kChunk) {
      int64_t n = std::min(kChunk, stream.size() - start);
      tokens.resize(static_cast<size_t>(n));
      stream.read(start, n, tokens.data());
      packed.assign(tokens.begin(), tokens.end());  // bytes: always < 256
      out.write(reinterpret_cast<const char*>(packed.data()), static_cast<std::streamsize>(2 * n));
    }
  }
  out.close();
  if (!out) throw Error(fmt::format("prepare-text: error writing '{}'", output));
}

// The output's folder is made when missing (data/ in a fresh checkout); `made` removes it
// again when the shard is not written.
void make_parent_directory(const std::string& output, io::MadeFolders& made) {
  const auto parent = std::filesystem::path(output).parent_path();
  if (parent.empty()) return;
  try {
    made.make(parent);
  } catch (const Error& e) {
    throw Error(fmt::format("prepare-text: {}", e.what()));
  }
}

// Appends `ids` to `out` as little-endian tokens of `width` bytes. An id the width cannot
// hold is refused rather than wrapped into another token.
void write_tokens(std::ofstream& out, const std::vector<int64_t>& ids, int width,
                  const std::string& file) {
  const int64_t limit = int64_t{1} << (8 * width);
  for (int64_t id : ids) {
    if (id < 0 || id >= limit) {
      throw Error(fmt::format("prepare-text: '{}': token id {} does not fit the shard's {}-bit "
                              "tokens",
                              file, id, 8 * width));
    }
  }
  if (width == 2) {
    std::vector<uint16_t> packed(ids.begin(), ids.end());
    out.write(reinterpret_cast<const char*>(packed.data()), static_cast<std::streamsize>(2 * packed.size()));
  } else {
    std::vector<uint32_t> packed(ids.begin(), ids.end());
    out.write(reinterpret_cast<const char*>(packed.data()), static_cast<std::streamsize>(4 * packed.size()));
  }
}

// Each file is a document: its tokens, then the end-of-text token. The
// header (llm.c) is written last, when the count is known.
int64_t write_tokenized(const std::vector<std::string>& inputs, const Tokenizer& tokenizer,
                        int64_t eos, TokenFormat format, int width, const std::string& path,
                        const std::string& output) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("prepare-text: cannot write '{}'", path));
  if (format == TokenFormat::llmc) out.write(std::string(kLlmcHeaderBytes, '\0').data(), kLlmcHeaderBytes);
  int64_t total = 0;
  for (const std::string& input : inputs) {
    for (const std::string& file : list_text_files(input, "prepare-text")) {
      std::vector<int64_t> ids;
      try {
        ids = tokenizer.encode(io::read_file(file));
      } catch (const Error& e) {
        throw Error(fmt::format("prepare-text: '{}': {}", file, e.what()));
      }
      ids.push_back(eos);
      write_tokens(out, ids, width, file);
      total += static_cast<int64_t>(ids.size());
    }
  }
  if (format == TokenFormat::llmc) {
    if (total > std::numeric_limits<int32_t>::max()) {
      throw Error(fmt::format("prepare-text: {} tokens do not fit an llm.c header", total));
    }
    std::vector<int32_t> header(256, 0);
    header[0] = width == 2 ? kLlmcMagic : kLlmcMagicU32;
    header[1] = width == 2 ? kLlmcVersion : kLlmcVersionU32;
    header[2] = static_cast<int32_t>(total);
    out.seekp(0);
    out.write(reinterpret_cast<const char*>(header.data()), kLlmcHeaderBytes);
  }
  out.close();
  if (!out) throw Error(fmt::format("prepare-text: error writing '{}'", output));
  return total;
}

// The written shard under its name, with its meta file: the meta file first, so that a shard
// never stands without the one its tokens were written for (a stale one from an earlier shard
// of that name is replaced, or removed when the rename fails).
void publish(TempFile& temp, const std::string& output, const ShardTokenizer& tokenizer,
             int64_t tokens) {
  try {
    write_shard_meta(output, tokenizer, tokens);
  } catch (const Error& e) {
    throw Error(fmt::format("prepare-text: {}", e.what()));
  }
  if (std::rename(temp.path.c_str(), output.c_str()) != 0) {
    const int error = errno;
    std::remove(shard_meta_path(output).c_str());
    throw Error(fmt::format("prepare-text: cannot write '{}': {}", output,
                            std::generic_category().message(error)));
  }
  temp.keep = true;
}

}  // namespace

int64_t prepare_text_tokenized(const std::vector<std::string>& inputs, const std::string& output,
                               TokenFormat format, const std::filesystem::path& tokenizer_path,
                               bool overwrite) {
  if (inputs.empty()) throw Error("prepare-text: no input files");
  if (detail::exists(output) && !overwrite) {
    throw Error(fmt::format("prepare-text: '{}' already exists; refusing to overwrite it (use "
                            "--overwrite to replace it)",
                            output));
  }
  auto tokenizer = Tokenizer::load(tokenizer_path);
  const int width = tokenizer->vocab_size() <= 65536 ? 2 : 4;
  if (format == TokenFormat::detect) format = TokenFormat::llmc;
  if (width == 4 && format == TokenFormat::nanogpt) {
    throw Error(fmt::format("prepare-text: the tokenizer has {} tokens, more than nanoGPT's "
                            "uint16 shards hold; use --format llmc (uint32 shards)",
                            tokenizer->vocab_size()));
  }
  const auto dir = std::filesystem::is_directory(tokenizer_path)
                       ? std::filesystem::path(tokenizer_path)
                       : std::filesystem::path(tokenizer_path).parent_path();
  const auto eos = end_of_text_token(*tokenizer, dir);
  const TokenizerIdentity identity = tokenizer_identity(tokenizer_path);
  io::MadeFolders folders;
  make_parent_directory(output, folders);
  TempFile temp{fmt::format("{}.tmp-{}", output, ::getpid())};
  const int64_t total = write_tokenized(inputs, *tokenizer, eos, format, width, temp.path, output);
  publish(temp, output,
          ShardTokenizer{identity.hash, identity.file.string(), tokenizer->vocab_size(), eos},
          total);
  folders.keep();
  // One line, with what a config needs next: the end-of-text id (data.eot_token) and the
  // vocabulary's size (model.vocab_size at least).
  log::info(fmt::format("prepare-text: wrote {} tokens ({}-bit, vocabulary {}, end of text {}) "
                        "to '{}' ({})",
                        total, 8 * width, tokenizer->vocab_size(), eos, output, to_string(format)));
  return total;
}

int64_t prepare_text(const std::vector<std::string>& inputs, const std::string& output,
                     TokenFormat format, bool overwrite) {
  if (inputs.empty()) throw Error("prepare-text: no input files");
  if (format == TokenFormat::detect) format = TokenFormat::llmc;
  if (detail::exists(output) && !overwrite) {
    throw Error(
        fmt::format("prepare-text: '{}' already exists; refusing to overwrite it (use --overwrite "
                    "to replace it)",
                    output));
  }
  std::vector<TokenStream> streams;
  int64_t total = 0;
  for (const std::string& input : inputs) {
    streams.push_back(open_text_files(input, "prepare-text"));
    total += streams.back().size();
  }
  if (format == TokenFormat::llmc && total > std::numeric_limits<int32_t>::max()) {
    throw Error(
        fmt::format("prepare-text: {} tokens do not fit an llm.c header (at most {}); "
                    "use the nanogpt format",
                    total, std::numeric_limits<int32_t>::max()));
  }
  io::MadeFolders folders;
  make_parent_directory(output, folders);
  // Same directory as the output, so the rename is atomic (never across file systems).
  TempFile temp{fmt::format("{}.tmp-{}", output, ::getpid())};
  write_shard(streams, total, format, temp.path, output);
  publish(temp, output, ShardTokenizer{"bytes", "", 256, std::nullopt}, total);
  folders.keep();
  log::info(fmt::format("prepare-text: wrote {} tokens (bytes: vocabulary 256, no end-of-text "
                        "token) to '{}' ({})",
                        total, output, to_string(format)));
  return total;
}

}  // namespace frugal
