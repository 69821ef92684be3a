// Instruction (supervised fine-tuning) data: conversations rendered with a chat template and
// tokenized, or token ids rendered elsewhere, each with the labels a model learns; and the data
// set that batches them, packed or padded. `data.type: chat | tokenized` (docs/finetuning.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config/config.h"
#include "frugal/data/chat.h"
#include "frugal/data/dataset.h"
#include "frugal/data/tokenizer.h"

namespace frugal {

// One example: token ids and, aligned with them, the ids a model learns to predict there or
// kIgnoreIndex (as transformers' `labels`: the shift to next-token targets is the data set's).
struct LabeledTokens {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;
};

// Which tokens of a conversation are learned: every assistant turn (its content and end
// marker), every token, or the last assistant turn only.
enum class TrainOn { Assistant, All, Last };
TrainOn parse_train_on(const std::string& name, const std::string& key);

// The conversation rendered by `chat` (no generation prompt), each segment tokenized in turn
// (so a label never straddles a segment's edge; the special tokens a template writes are the
// tokenizer's added tokens, at which it cuts text anyway).
LabeledTokens tokenize_conversation(const Conversation& conversation, const ChatTemplate& chat,
                                    const Tokenizer& tokenizer, TrainOn train_on);

// What reading a file kept and dropped, for the run's log.
struct InstructionStats {
  int64_t samples = 0;    // kept
  int64_t no_target = 0;  // dropped: nothing to learn (no assistant turn, or cut away)
  int64_t truncated = 0;  // longer than max_tokens and cut
};

// How samples are admitted. Long ones: at most max_tokens tokens (seq_len + 1: seq_len inputs
// and their next tokens); "right" cuts the end, "left" the start, "error" refuses the sample
// naming its line. Those with nothing to learn (no labelled token after the first, e.g. no
// assistant turn under train_on assistant, or all cut away): "skip" drops and counts them,
// "error" refuses the first naming its line (data.no_target).
struct SamplePolicy {
  int64_t max_tokens = 0;
  std::string truncate = "right";
  std::string no_target = "skip";
};

// A chat JSONL file's conversations as labeled tokens.
std::vector<LabeledTokens> read_chat_samples(const std::filesystem::path& file,
                                             const ChatTemplate& chat, const Tokenizer& tokenizer,
                                             TrainOn train_on, const SamplePolicy& length,
                                             InstructionStats* stats);
// A JSONL file of {"input_ids": [...], "labels": [...]} (labels optional: then every token is
// learned; -100 = not learned), each id in [0, vocab_size).
std::vector<LabeledTokens> read_tokenized_samples(const std::filesystem::path& file,
                                                  int64_t vocab_size, const SamplePolicy& length,
                                                  InstructionStats* stats);

// Best-fit-decreasing: the items (by length, each <= capacity) in bins of `capacity`, each bin
// the item indices it holds in the order placed. Deterministic: ties keep the input order.
std::vector<std::vector<int64_t>> pack_best_fit_decreasing(const std::vector<int64_t>& lengths,
                                                           int64_t capacity);

// Rows grouped into batches by positions (data.max_tokens_per_batch): longest first, each
// batch at most max_rows rows and at most max_positions positions (its rows x its longest),
// so rows of like length share a batch and little is padding. Deterministic: ties keep the
// input order. Each batch lists its row indices.
std::vector<std::vector<int64_t>> group_by_positions(const std::vector<int64_t>& lengths,
                                                     int64_t max_positions, int64_t max_rows);

// Samples as a data set. Each sample of n tokens gives n - 1 positions (input token, next
// token's label). Packed: rows of exactly seq_len positions holding several samples, position
// ids restarting at 0 for each (a model that takes them keeps attention within a sample), the
// rest of a row padding; else one sample a row, a batch padded at its end to its longest
// row. Padding is token 0 with label kIgnoreIndex (right padding needs no attention mask
// under causal attention: no real token attends to a later one).
// With max_tokens_per_batch > 0 an item is a whole batch of rows (group_by_positions, at most
// max_rows of them) and a Batch of several items records them in Batch::parts.
class InstructionDataset : public Dataset {
 public:
  InstructionDataset(std::vector<LabeledTokens> samples, int64_t seq_len, bool packing,
                     int64_t max_tokens_per_batch = 0, int64_t max_rows = 0);
  int64_t size() const override { return static_cast<int64_t>(items_.size()); }
  Batch get(const std::vector<int64_t>& indices) const override;
  // Of the positions the batches hold (rows x seq_len when packed, else rows x the longest
  // row of the batch, one row a batch without max_tokens_per_batch), how many are samples'.
  double fill() const;
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }

 private:
  int64_t row_positions(int64_t row) const;

  std::vector<LabeledTokens> samples_;
  std::vector<std::vector<int64_t>> rows_;   // each row's samples
  std::vector<std::vector<int64_t>> items_;  // each item's rows: one, or a token-capped batch
  int64_t seq_len_;
  bool packing_;
  bool grouped_;
};

// The samples of data.type chat or tokenized in `file` (data.path or data.val_path), cut to
// seq_len + 1 tokens as data.truncate says; `key` names the file's config key in errors.
std::vector<LabeledTokens> read_instruction_samples(const DataConfig& data,
                                                    const ModelConfig& model,
                                                    const std::string& file, const std::string& key,
                                                    InstructionStats* stats);

}  // namespace frugal
