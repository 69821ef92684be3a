// What a token shard's ids mean: prepare-text writes `<shard>.json` beside each shard it makes,
// naming the tokenizer (its identity, data/tokenizer.h), the vocabulary's size and the
// end-of-text id. Training reads it back to refuse a model whose tokenizer is another one and
// to default data.eot_token; shards from elsewhere (nanoGPT's, llm.c's) have none and are
// taken as they are.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "frugal/config/config.h"
#include "frugal/data/token_stream.h"

namespace frugal {

struct ShardTokenizer {
  std::string hash;  // TokenizerIdentity::hash, or "bytes" for byte-level tokens
  std::string file;  // the tokenizer file it came from, for messages ("" for bytes)
  int64_t vocab_size = 0;
  std::optional<int64_t> eot_token;
};

// "<shard>.json": never a `*.bin`, so a folder of shards does not take it for one.
std::filesystem::path shard_meta_path(const std::filesystem::path& shard);

// Writes the meta file of `shard` (which holds `tokens` tokens) atomically.
void write_shard_meta(const std::filesystem::path& shard, const ShardTokenizer& tokenizer,
                      int64_t tokens);

// The tokenizer the shards of `stream` were written with, from their meta files: nullopt when
// none has one. A meta file whose token count is not its shard's is stale (the shard was
// replaced by another tool): ignored with a warning. Shards of two tokenizers, or a meta file
// that is not valid, are a frugal::Error naming `key` and the files.
std::optional<ShardTokenizer> read_shard_tokenizer(const TokenStream& stream,
                                                   const std::string& key);

// The check training makes before reading `data` (data.type tokens, whose shards' tokenizer is
// `shard`, or text: bytes): when model.init_from is a folder with a tokenizer, the data must
// come from that tokenizer, unless data.allow_tokenizer_mismatch. The frugal::Error names both
// tokenizers and the override.
void check_data_tokenizer(const DataConfig& data, const ModelConfig& model,
                          const std::optional<ShardTokenizer>& shard, const std::string& key,
                          const std::string& path);

}  // namespace frugal
