// "Did you mean" for unknown keys and values: the closest candidate by edit distance, offered
// only when it is close enough to be a plausible typo.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <string>

#include "internal.h"

namespace frugal::config_detail {

// Edit distance with transpositions (insert, delete, substitute, swap two neighbours: the
// optimal string alignment distance), case-insensitive: "trian" is one edit from "train", as a
// typist would count it. Three rows of memory: the swap looks two rows back.
size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  std::vector<size_t> before(b.size() + 1), above(b.size() + 1), row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    before.swap(above);
    above.swap(row);
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = lower(a[i - 1]) == lower(b[j - 1]);
      row[j] = std::min({above[j] + 1, row[j - 1] + 1, above[j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
  }
  return row[b.size()];
}

const std::string* alias_of(std::string_view name) {
  // What other trainers call a key (Hugging Face's TrainingArguments, Lightning, nanoGPT): the
  // name a newcomer types first, with the key frugal has for it.
  static const std::map<std::string, std::string, std::less<>> aliases = {
      {"learning_rate", "optim.lr"},
      {"batch_size", "data.micro_batch_size"},
      {"per_device_train_batch_size", "data.micro_batch_size"},
      {"train_batch_size", "data.micro_batch_size"},
      {"gradient_accumulation_steps", "strategy.accumulation"},
      {"grad_accum", "strategy.accumulation"},
      {"accumulate_grad_batches", "strategy.accumulation"},
      {"max_grad_norm", "optim.clip_grad_norm"},
      {"gradient_clip_val", "optim.clip_grad_norm"},
      {"grad_clip", "optim.clip_grad_norm"},
      {"max_iters", "train.max_steps"},
      {"steps", "train.max_steps"},
      {"warmup", "schedule.warmup_steps"},
      {"warmup_iters", "schedule.warmup_steps"},
      {"output_dir", "run.dir"},
      {"out_dir", "run.dir"},
      {"gradient_checkpointing", "strategy.checkpointing"},
      {"mixed_precision", "strategy.precision"},
      {"fp16", "strategy.precision"},
      {"bf16", "strategy.precision"},
      {"dtype", "strategy.precision"},
      {"save_steps", "train.checkpoint_every"},
      {"logging_steps", "train.log_every"},
      {"eval_steps", "train.eval_every"},
  };
  const auto it = aliases.find(name);
  return it == aliases.end() ? nullptr : &it->second;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  // A third of the word may be wrong (at least one edit), so "lrr" finds "lr" but "x" finds
  // nothing; a clipped name ("warmup" for "warmup_steps") counts as close too.
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  const std::string* best = nullptr;
  size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const bool clipped = word.size() >= 3 && candidate.starts_with(word);
    const size_t d = clipped ? allowed : edit_distance(word, candidate);
    if (d < best_distance) best = &candidate, best_distance = d;
  }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

}  // namespace frugal::config_detail
