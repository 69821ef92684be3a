// A flat token sequence concatenated from memory-mapped files: nanoGPT `.bin` shards (raw
// little-endian uint16), llm.c shards (256 x int32 header, then uint16) or text files (one
// byte per token). Nothing is copied at open; reads widen tokens into int64 on demand.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace frugal {

namespace detail {
class MappedFile;
}

enum class TokenFormat {
  detect,   // "auto": llm.c when the file starts with its magic, else nanoGPT
  nanogpt,  // raw little-endian uint16 tokens, no header
  llmc,     // int32 header[256] = {20240520, 1, n_tokens, ...}, then n_tokens uint16; or
            // {20240801, 7, n_tokens, ...}, then uint32 (llm.c's Llama 3 shards)
};

// "auto" | "nanogpt" | "llmc"; anything else throws frugal::Error naming data.token_format.
TokenFormat parse_token_format(const std::string& name);
std::string_view to_string(TokenFormat format);

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;  // uint16 tokens
// Vocabularies past 65536 tokens (Llama 3, Qwen2.5): llm.c's uint32 shards.
inline constexpr int32_t kLlmcMagicU32 = 20240801;
inline constexpr int32_t kLlmcVersionU32 = 7;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

class TokenStream {
 public:
  // One file's tokens: `count` little-endian unsigned tokens of `width` bytes (1, 2 or 4).
  struct Shard {
    std::shared_ptr<const detail::MappedFile> file;  // keeps `tokens` mapped
    std::string path;
    const uint8_t* tokens = nullptr;
    int64_t count = 0;
    int width = 2;
  };

  TokenStream() = default;
  explicit TokenStream(std::vector<Shard> shards);

  int64_t size() const { return total_; }  // tokens
  const std::vector<Shard>& shards() const { return shards_; }

  // Tokens [start, start + count), across shard boundaries, widened into out[0, count).
  void read(int64_t start, int64_t count, int64_t* out) const;

  // Throws frugal::Error "<key>: '<file>': token <v> at index <i> is >= model.vocab_size <n>"
  // for the first token >= vocab_size among tokens [begin, end). One parallel max pass over
  // the mapped bytes; a second pass runs only to locate an offending token.
  void check_vocab(int64_t vocab_size, int64_t begin, int64_t end, const std::string& key) const;

 private:
  std::vector<Shard> shards_;
  std::vector<int64_t> starts_;  // starts_[s] = index of shard s's first token in the stream
  int64_t total_ = 0;
};

// One token file, or a directory of `*.bin` shards (sorted by name, concatenated). Validates
// each file's header and size; errors name `key` (data.path or data.val_path) and the file.
TokenStream open_token_files(const std::string& path, TokenFormat format, const std::string& key);

}  // namespace frugal
