// From the `data:` config section to a data set for one split.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>

#include "frugal/data/dataset.h"
#include "frugal/data/idx.h"
#include "frugal/data/instruction_data.h"
#include "frugal/data/shard_meta.h"
#include "frugal/data/synthetic.h"
#include "frugal/data/text.h"
#include "frugal/data/token_dataset.h"
#include "frugal/models/model_spec.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal {

namespace {

// Whether the model's forward takes position ids (its spec), so documents can be kept apart.
bool takes_position_ids(const ModelConfig& model) {
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  return spec && spec->position_ids;
}

// Where the split's data lives: val_path holds all of val when set; otherwise val is the last
// val_fraction of `path` and train the rest.
struct Source {
  std::string path;
  std::string key;
  bool whole;  // the split uses every sample of `path`
};

Source source_of(const DataConfig& data, Split split) {
  if (!data.val_path.empty()) {
    if (split == Split::val) return {data.val_path, "data.val_path", true};
    return {data.path, "data.path", true};
  }
  return {data.path, "data.path", false};
}

// [first, first + count) of `total` samples for this split.
std::pair<int64_t, int64_t> split_range(const DataConfig& data, const Source& source, Split split,
                                        int64_t total) {
  if (source.whole) return {0, total};
  const double fraction = data.val_fraction;
  int64_t val = 0;
  if (fraction > 0) val = std::max<int64_t>(1, std::llround(fraction * double(total)));
  if (total - val < 1) {
    throw Error(
        fmt::format("{}: '{}' holds {} samples: too few to hold out data.val_fraction {} "
                    "for validation (set data.val_path or data.val_fraction: 0)",
                    source.key, source.path, total, fraction));
  }
  return split == Split::train ? std::pair{int64_t{0}, total - val} : std::pair{total - val, val};
}

std::shared_ptr<Dataset> token_dataset(const DataConfig& data, const ModelConfig& model,
                                       Split split, bool text) {
  const Source source = source_of(data, split);
  if (source.path.empty()) {
    throw Error(fmt::format("data.path: required for data.type {}", data.type));
  }
  TokenStream stream =
      text ? open_text_files(source.path, source.key)
           : open_token_files(source.path, parse_token_format(data.token_format), source.key);
  const int64_t T = resolved_seq_len(data, model);
  if (stream.size() < T + 1) {
    throw Error(
        fmt::format("{}: '{}' holds {} tokens, too few for one sample of data.seq_len {} "
                    "(needs {})",
                    source.key, source.path, stream.size(), T, T + 1));
  }
  const std::optional<ShardTokenizer> tokenizer =
      text ? std::optional<ShardTokenizer>(ShardTokenizer{"bytes", "", 256, std::nullopt})
           : read_shard_tokenizer(stream, source.key);
  check_data_tokenizer(data, model, tokenizer, source.key, source.path);
  int64_t eot = text ? -1 : data.eot_token;
  if (eot < 0 && !text && tokenizer && tokenizer->eot_token && takes_position_ids(model)) {
    // Documents stay apart, as data.eot_token does when set.
    eot = *tokenizer->eot_token;
    if (split == Split::train) {
      log::info(fmt::format("data: documents end at token {} (data.eot_token, from '{}')", eot,
                            shard_meta_path(stream.shards().front().path).string()));
    }
  }
  auto all = std::make_shared<TokenDataset>(std::move(stream), T, eot);
  auto [first, count] = split_range(data, source, split, all->size());
  // Only the tokens this split reads: train and val each check their own part.
  all->stream().check_vocab(model.vocab_size, first * T, (first + count) * T + 1, source.key);
  return slice(all, first, count);
}

std::shared_ptr<Dataset> idx_dataset(const DataConfig& data, const ModelConfig& model,
                                     Split split) {
  const Source source = source_of(data, split);
  if (source.path.empty()) throw Error("data.path: required for data.type idx");
  std::string labels = source.key == "data.path" ? data.labels_path : "";
  if (labels.empty()) labels = default_idx_labels_path(source.path);
  if (labels.empty()) {
    throw Error(
        fmt::format("data.labels_path: not set, and '{}' has no \"images\" or \"idx3\" in "
                    "its name to derive it from",
                    source.path));
  }
  const std::optional<ModelSpec> spec = find_model_spec(model.type);
  const int64_t classes = spec && spec->classes ? spec->classes(model) : 0;
  auto all = std::make_shared<IdxDataset>(source.path, labels, source.key, classes);
  auto [first, count] = split_range(data, source, split, all->size());
  return slice(all, first, count);
}

// Without data.val_path both splits come from one file: the train split reads and tokenizes it
// and leaves the validation samples here, keyed by the file and what reading depends on, for
// the val split to take; so a large chat file is tokenized once and nothing is held twice.
struct HeldOut {
  std::vector<LabeledTokens> samples;
  InstructionStats stats;
  std::string version;  // the file's size and time when read
};
std::mutex held_out_mutex;
std::map<std::string, HeldOut> held_out;

std::string held_out_key(const DataConfig& data, const ModelConfig& model,
                         const std::string& path) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", path, data.type, data.chat_format,
                     data.tokenizer, data.train_on, data.truncate, resolved_seq_len(data, model),
                     data.val_fraction, model.init_from, model.vocab_size, model.block_size);
}

// "" when the file is not there.
std::string file_version(const std::string& path) {
  std::error_code size_error, time_error;
  const auto size = std::filesystem::file_size(path, size_error);
  const auto time = std::filesystem::last_write_time(path, time_error);
  if (size_error || time_error) return "";
  return fmt::format("{}@{}", size, time.time_since_epoch().count());
}

std::shared_ptr<Dataset> instruction_dataset(const DataConfig& data, const ModelConfig& model,
                                             Split split) {
  const Source source = source_of(data, split);
  if (source.path.empty())
    throw Error(fmt::format("data.path: required for data.type {}", data.type));
  const std::string key = source.whole ? "" : held_out_key(data, model, source.path);
  InstructionStats stats;
  std::vector<LabeledTokens> mine;
  int64_t count = 0;
  std::unique_lock<std::mutex> lock(held_out_mutex);
  const std::string version = key.empty() ? "" : file_version(source.path);
  auto it = held_out.find(key);
  // (a file replaced since is read again; one moved away since is not needed)
  if (split == Split::val && it != held_out.end() &&
      (version.empty() || version == it->second.version)) {
    mine = std::move(it->second.samples);
    stats = it->second.stats;
    held_out.erase(it);
    count = static_cast<int64_t>(mine.size());
  } else {
    if (split == Split::val && it != held_out.end()) held_out.erase(it);
    lock.unlock();
    std::vector<LabeledTokens> samples =
        read_instruction_samples(data, model, source.path, source.key, &stats);
    const auto total = static_cast<int64_t>(samples.size());
    if (total == 0) {
      throw Error(fmt::format(
          "{}: '{}' holds no sample with a token to learn ({} without one{})", source.key,
          source.path, stats.no_target,
          data.type == "chat" ? fmt::format(" under data.train_on {}", data.train_on) : ""));
    }
    const auto [first, n] = split_range(data, source, split, total);
    count = n;
    mine.assign(std::make_move_iterator(samples.begin() + first),
                std::make_move_iterator(samples.begin() + first + count));
    if (split == Split::train && !key.empty() && first + count < total) {
      HeldOut val{{std::make_move_iterator(samples.begin() + first + count),
                   std::make_move_iterator(samples.end())},
                  stats,
                  version};
      lock.lock();
      held_out[key] = std::move(val);
    }
  }
  if (lock.owns_lock()) lock.unlock();
  const int64_t T = resolved_seq_len(data, model);
  if (count == 0) return std::make_shared<InstructionDataset>(std::move(mine), T, data.packing);
  if (data.max_tokens_per_batch > 0 && data.max_tokens_per_batch < T) {
    throw Error(
        fmt::format("data.max_tokens_per_batch: {} is less than the {} positions of a "
                    "sample (data.seq_len), which must fit one batch",
                    data.max_tokens_per_batch, T));
  }
  auto dataset = std::make_shared<InstructionDataset>(
      std::move(mine), T, data.packing, data.max_tokens_per_batch, data.micro_batch_size);
  const std::string batches =
      data.max_tokens_per_batch > 0
          ? fmt::format(", {} batches of at most {} tokens ({:.1f}% of their positions real)",
                        dataset->size(), data.max_tokens_per_batch, 100.0 * dataset->fill())
          : "";
  log::info(fmt::format(
      "data ({}): {} samples{}{}, {} rows{}{}", split == Split::train ? "train" : "val", count,
      stats.no_target ? fmt::format(" ({} skipped: nothing to learn)", stats.no_target) : "",
      stats.truncated ? fmt::format(" ({} truncated {})", stats.truncated, data.truncate) : "",
      dataset->rows(),
      data.packing && data.max_tokens_per_batch == 0
          ? fmt::format(", packed {:.1f}% full", 100.0 * dataset->fill())
          : "",
      batches));
  return dataset;
}

}  // namespace

int64_t resolved_seq_len(const DataConfig& data, const ModelConfig& model) {
  if (data.seq_len < 0)
    throw Error(fmt::format("data.seq_len must be >= 0 (got {})", data.seq_len));
  int64_t T = data.seq_len > 0 ? data.seq_len : model.block_size;
  if (T < 1) throw Error(fmt::format("model.block_size must be >= 1 (got {})", model.block_size));
  return T;
}

std::shared_ptr<Dataset> make_dataset(const DataConfig& data, const ModelConfig& model, Split split,
                                      uint64_t seed) {
  if (!(data.val_fraction >= 0 && data.val_fraction < 1)) {
    throw Error(fmt::format("data.val_fraction must be in [0, 1) (got {})", data.val_fraction));
  }
  if (data.type == "synthetic") {
    SyntheticOptions options = synthetic_options(data, model, split, seed);
    // val_fraction 0 means "no validation data", for synthetic data too.
    if (split == Split::val && data.val_fraction == 0) options.samples = 0;
    return make_synthetic(options);
  }
  if (data.type == "tokens") return token_dataset(data, model, split, /*text=*/false);
  if (data.type == "text") return token_dataset(data, model, split, /*text=*/true);
  if (data.type == "idx") return idx_dataset(data, model, split);
  if (data.type == "chat" || data.type == "tokenized")
    return instruction_dataset(data, model, split);
  throw Error(fmt::format(
      "data.type: unknown '{}' (expected tokens | text | idx | synthetic | chat | tokenized)",
      data.type));
}

}  // namespace frugal
