#include "bpe_tables.h"

#include <fmt/format.h>

#include <limits>
#include <unordered_set>

namespace frugal::detail {
namespace {

// `tokenizers` stores ids as u32: a larger, negative or fractional id does not load there.
constexpr int64_t kMaxTokenId = std::numeric_limits<uint32_t>::max();

std::string token_text(const std::string& token) { return json_input::describe(nlohmann::json(token)); }

void read_vocab(const json_input::Node& model, BpeTables& t) {
  const json_input::Node vocab = model.at("vocab");
  for (const auto& [token, value] : vocab.object().items()) {
    const int64_t id = json_input::Node(value, vocab.file(), vocab.key() + "[" + token_text(token) + "]")
                           .integer(0, kMaxTokenId);
    auto [it, fresh] = t.token_of_id.emplace(id, token);
    if (!fresh) {
      vocab.fail(fmt::format("{} and {} both have id {} (ids must be unique)", token_text(it->second),
                             token_text(token), id));
    }
    t.vocab.emplace(token, id);
    t.max_id = std::max(t.max_id, id);
  }
}

void read_merges(const json_input::Node& model, BpeTables& t) {
  const json_input::Node merges = model.at("merges");
  merges.array();
  for (size_t k = 0; k < merges.value().size(); ++k) {
    const json_input::Node merge = merges.item(k);
    std::string a, b;
    if (merge.value().is_string()) {
      // tokenizers' "a b" form: exactly two parts, split at the one space.
      const std::string s = merge.string();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        merge.fail(fmt::format("{} is not two tokens 'a b'", token_text(s)));
      }
      a = s.substr(0, space), b = s.substr(space + 1);
    } else {
      if (!merge.value().is_array() || merge.value().size() != 2) {
        merge.fail(fmt::format("expected \"a b\" or [\"a\", \"b\"], got {}",
                               json_input::describe(merge.value())));
      }
      a = merge.item(0).string(), b = merge.item(1).string();
    }
    for (const std::string* part : std::initializer_list<const std::string*>{&a, &b, nullptr}) {
      const std::string token = part ? *part : a + b;
      if (!t.vocab.contains(token)) {
        merge.fail(fmt::format("{}{} is not in model.vocab", part ? "" : "the merged token ",
                               token_text(token)));
      }
    }
    // A repeated merge keeps its first (lowest) rank, as the merge loop would find it first.
    t.ranks.emplace(a + '\x01' + b, static_cast<int64_t>(k));
  }
}

void read_added(const json_input::Node& root, BpeTables& t) {
  const auto list = root.find("added_tokens");
  if (!list) return;
  list->array();
  std::unordered_map<int64_t, std::string> content_of_id;
  std::unordered_set<std::string> contents;
  for (size_t k = 0; k < list->value().size(); ++k) {
    const json_input::Node token = list->item(k);
    token.object();
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (token.boolean_or(flag, false)) {
        token.at(flag).fail("true is not supported");
      }
    }
    AddedToken added;
    added.content = token.at("content").string();
    const json_input::Node id_node = token.at("id");
    added.id = id_node.integer(0, kMaxTokenId);
    // `tokenizers` writes the flag; without it, special tokens are matched in the raw text.
    added.normalized = token.boolean_or("normalized", !token.boolean_or("special", false));
    // An id the vocabulary already gives to another token would decode to one and be written
    // for the other.
    if (auto it = t.token_of_id.find(added.id); it != t.token_of_id.end() && it->second != added.content) {
      id_node.fail(fmt::format("{} is {} in model.vocab, not {}", added.id, token_text(it->second),
                               token_text(added.content)));
    }
    if (auto it = t.vocab.find(added.content); it != t.vocab.end() && it->second != added.id) {
      id_node.fail(fmt::format("{}, but model.vocab has {} as {}", added.id, token_text(added.content),
                               it->second));
    }
    if (auto [it, fresh] = content_of_id.emplace(added.id, added.content); !fresh) {
      id_node.fail(fmt::format("{} is also the id of the added token {}", added.id,
                               token_text(it->second)));
    }
    if (!contents.insert(added.content).second) {
      token.at("content").fail(fmt::format("{} is added twice", token_text(added.content)));
    }
    t.max_id = std::max(t.max_id, added.id);
    t.added.push_back(std::move(added));
  }
}

}  // namespace

BpeTables read_bpe_tables(const json_input::Node& root) {
  BpeTables t;
  const json_input::Node model = root.at("model");
  read_vocab(model, t);
  read_merges(model, t);
  if (auto unk = model.find("unk_token")) {
    // An unk_token the vocabulary lacks is never produced (as in `tokenizers`).
    auto it = t.vocab.find(unk->string());
    if (it != t.vocab.end()) t.unk = it->second;
  }
  read_added(root, t);
  return t;
}

}  // namespace frugal::detail
