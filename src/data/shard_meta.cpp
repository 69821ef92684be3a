#include "frugal/data/shard_meta.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "frugal/data/tokenizer.h"
#include "frugal/io/atomic_file.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;

namespace frugal {

namespace {

constexpr int64_t kMetaMaxBytes = int64_t{1} << 20;
constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();

struct ShardMeta {
  ShardTokenizer tokenizer;
  int64_t tokens = 0;
};

ShardMeta parse_meta(const fs::path& file) {
  const auto doc = json_input::parse_file(file, kMetaMaxBytes);
  const json_input::Node j(doc, file.string());
  j.object();
  ShardMeta meta;
  meta.tokens = j.at("tokens").integer(0, kMaxId);
  const json_input::Node t = j.at("tokenizer");
  t.object();
  meta.tokenizer.hash = t.at("hash").string();
  if (auto f = t.find("file")) meta.tokenizer.file = f->string();
  meta.tokenizer.vocab_size = t.at("vocab_size").integer(1, kMaxId);
  if (auto e = t.find("eot_token")) {
    meta.tokenizer.eot_token = e->integer(0, meta.tokenizer.vocab_size - 1);
  }
  return meta;
}

std::string describe(const ShardTokenizer& t) {
  if (t.hash == "bytes") return "byte-level tokens (prepare-text without --tokenizer)";
  return fmt::format("the tokenizer '{}' ({})", t.file, t.hash);
}

}  // namespace

fs::path shard_meta_path(const fs::path& shard) { return fs::path(shard.string() + ".json"); }

void write_shard_meta(const fs::path& shard, const ShardTokenizer& tokenizer, int64_t tokens) {
  nlohmann::json t = {{"hash", tokenizer.hash}, {"vocab_size", tokenizer.vocab_size}};
  if (!tokenizer.file.empty()) t["file"] = tokenizer.file;
  t["eot_token"] = tokenizer.eot_token ? nlohmann::json(*tokenizer.eot_token) : nlohmann::json();
  const nlohmann::json meta = {
      {"written_by", "frugal prepare-text"}, {"tokens", tokens}, {"tokenizer", t}};
  io::write_file_atomic(shard_meta_path(shard), meta.dump(2) + "\n");
}

std::optional<ShardTokenizer> read_shard_tokenizer(const TokenStream& stream,
                                                   const std::string& key) {
  std::optional<ShardTokenizer> found;
  std::string found_in;
  for (const TokenStream::Shard& shard : stream.shards()) {
    const fs::path file = shard_meta_path(shard.path);
    if (!fs::exists(file)) continue;
    ShardMeta meta;
    try {
      meta = parse_meta(file);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", key, e.what()));
    }
    if (meta.tokens != shard.count) {
      log::warn(
          fmt::format("{}: '{}' describes {} tokens but '{}' holds {}: ignored (the shard "
                      "was replaced since prepare-text wrote it)",
                      key, file.string(), meta.tokens, shard.path, shard.count));
      continue;
    }
    if (found && found->hash != meta.tokenizer.hash) {
      throw Error(fmt::format("{}: '{}' holds {} but '{}' holds {}: one data set, one tokenizer",
                              key, found_in, describe(*found), shard.path,
                              describe(meta.tokenizer)));
    }
    if (!found) {
      found = meta.tokenizer;
      found_in = shard.path;
    }
  }
  return found;
}

void check_data_tokenizer(const DataConfig& data, const ModelConfig& model,
                          const std::optional<ShardTokenizer>& shard, const std::string& key,
                          const std::string& path) {
  if (!shard || data.allow_tokenizer_mismatch || model.init_from.empty()) return;
  const fs::path folder = model.init_from;
  if (!fs::is_directory(folder) || !has_tokenizer_file(folder)) return;
  const TokenizerIdentity mine = tokenizer_identity(folder);
  if (mine.hash == shard->hash) return;
  throw Error(fmt::format(
      "{}: '{}' holds {}, but model.init_from's tokenizer is '{}' ({}): the ids would mean other "
      "words to this model. Make the data with `frugal prepare-text --tokenizer {}`, or set "
      "data.allow_tokenizer_mismatch: true to train on it anyway",
      key, path, describe(*shard), mine.file.string(), mine.hash, folder.string()));
}

}  // namespace frugal
