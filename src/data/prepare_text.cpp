// `frugal prepare-text`: text files -> one uint16 token shard (byte-level tokens).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <limits>
#include <system_error>

#include "files.h"
#include "frugal/data/text.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

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

}  // namespace

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
  // Same directory as the output, so the rename is atomic (never across file systems).
  TempFile temp{fmt::format("{}.tmp-{}", output, ::getpid())};
  write_shard(streams, total, format, temp.path, output);
  if (std::rename(temp.path.c_str(), output.c_str()) != 0) {
    throw Error(fmt::format("prepare-text: cannot write '{}': {}", output,
                            std::generic_category().message(errno)));
  }
  temp.keep = true;
  log::info(
      fmt::format("prepare-text: wrote {} tokens to '{}' ({})", total, output, to_string(format)));
  return total;
}

}  // namespace frugal
