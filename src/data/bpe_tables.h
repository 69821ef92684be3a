// The tables of a tokenizer.json's BPE model (vocabulary, merges, added tokens), checked when
// the file loads as the `tokenizers` library checks them, and more strictly where it lets an
// inconsistency through to write wrong ids later: a wrong one is a frugal::Error naming the
// file and the key ("model.merges[3]: 'x' is not in model.vocab"), not a surprise when some
// text reaches it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frugal/util/json_input.h"

namespace frugal::detail {

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool normalized = false;  // matched in the normalized text (else in the raw text)
};

struct BpeTables {
  std::unordered_map<std::string, int64_t> vocab;
  std::unordered_map<int64_t, std::string> token_of_id;  // model.vocab inverted
  std::unordered_map<std::string, int64_t> ranks;        // "a\x01b" -> the merge's rank
  std::vector<AddedToken> added;
  std::optional<int64_t> unk;
  int64_t max_id = -1;  // over the vocabulary and the added tokens
};

// From the document's root: model.vocab (ids are u32, as `tokenizers` reads them, and unique),
// model.merges ("a b" or ["a", "b"]; both parts and their concatenation in model.vocab),
// model.unk_token, and added_tokens (an id a vocabulary entry has belongs to that entry's
// content; ids and contents unique among them).
BpeTables read_bpe_tables(const json_input::Node& root);

}  // namespace frugal::detail
