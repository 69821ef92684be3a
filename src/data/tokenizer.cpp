// Tokenizer::load's choice of file (tokenizer.json or a SentencePiece model, whose class is
// in sentencepiece_tokenizer.cpp), and byte-level BPE from tokenizer.json (docs/data.md,
// "Tokenizers"), following the `tokenizers` package step by step: added tokens that are not
// `normalized` cut the raw text first; each remaining segment is normalized (NFC, ...), cut
// again at the `normalized` added tokens, and goes through the pre-tokenizers (Split, Digits,
// ByteLevel, or a Sequence of them); ByteLevel maps each piece's bytes to GPT-2's printable
// alphabet; BPE merges the piece's symbols by rank (lowest first, every occurrence left to
// right), unless ignore_merges finds the whole piece in the vocabulary.
#include "frugal/data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "bpe_tables.h"
#include "frugal/io/atomic_file.h"
#include "frugal/io/hash.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"
#include "regex_split.h"
#include "sentencepiece_tokenizer.h"
#include "unicode_normalize.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {
namespace {

// GPT-2's byte alphabet: printable bytes stand for themselves, the others for code points
// from 256 up, so that every byte is one visible character.
std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct ByteAlphabet {
  std::string of_byte[256];
  std::unordered_map<std::string, unsigned char> to_byte;
  ByteAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      of_byte[b] = utf8_of(printable ? static_cast<uint32_t>(b) : next++);
      to_byte[of_byte[b]] = static_cast<unsigned char>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
}

// The GPT-2 pre-tokenizer's pattern (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One pre-tokenization step: splits each piece further.
struct PreStep {
  enum class Kind { split, digits, byte_level } kind;
  std::shared_ptr<detail::Regex> regex;  // split, byte_level with use_regex
  std::string behavior = "Isolated";     // split: Isolated | Removed | MergedWithPrevious | MergedWithNext
  bool individual_digits = false;        // digits
  bool add_prefix_space = false;         // byte_level
};

using Pieces = std::vector<std::string>;

// Cuts `piece` at the ranges, keeping or merging them as `behavior` says.
void cut(const std::string& piece, const std::vector<std::pair<size_t, size_t>>& ranges,
         const std::string& behavior, Pieces& out) {
  size_t at = 0;
  std::string carry;  // MergedWithNext: a match waiting for the text after it
  auto emit = [&](std::string s) {
    if (!carry.empty()) {
      s = carry + s;
      carry.clear();
    }
    if (!s.empty()) out.push_back(std::move(s));
  };
  for (const auto& [b, e] : ranges) {
    std::string gap = piece.substr(at, b - at), match = piece.substr(b, e - b);
    if (behavior == "Isolated") {
      emit(gap);
      emit(match);
    } else if (behavior == "Removed") {
      emit(gap);
    } else if (behavior == "MergedWithPrevious") {
      emit(gap + match);
    } else {  // MergedWithNext
      emit(gap);
      carry += match;
    }
    at = e;
  }
  emit(piece.substr(at));
  if (!carry.empty()) out.push_back(carry);
}

class BpeTokenizer final : public Tokenizer {
 public:
  // Every value read through json_input::Node: a wrong type is an error naming the key.
  explicit BpeTokenizer(const json_input::Node& j) : what_(j.file()) {
    j.object();
    const json_input::Node m = j.at("model");
    m.object();
    const std::string type = m.string_or("type", "");
    if (type != "BPE") {
      (m.find("type") ? *m.find("type") : m.at("type")).fail(fmt::format("'{}' (supported: BPE)", type));
    }
    if (auto dropout = m.find("dropout")) dropout->fail("must be null");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (auto v = m.find(key); v && v->string() != "") v->fail("not supported");
    }
    if (m.boolean_or("byte_fallback", false)) {
      m.at("byte_fallback").fail("not supported (byte-level BPE needs none)");
    }
    ignore_merges_ = m.boolean_or("ignore_merges", false);
    detail::BpeTables tables = detail::read_bpe_tables(j);
    vocab_ = std::move(tables.vocab);
    by_id_ = std::move(tables.token_of_id);
    ranks_ = std::move(tables.ranks);
    unk_ = tables.unk;
    max_id_ = tables.max_id;
    parse_normalizer(j.find("normalizer"));
    for (const detail::AddedToken& t : tables.added) {
      added_[t.content] = t.id;
      added_by_id_[t.id] = t.content;
      AddedByFirstByte& table = t.normalized ? added_in_normalized_ : added_in_raw_;
      if (!t.content.empty()) table[static_cast<unsigned char>(t.content[0])].push_back(t.content);
    }
    for (AddedByFirstByte* table : {&added_in_raw_, &added_in_normalized_}) {
      for (auto& [_, list] : *table) {
        std::sort(list.begin(), list.end(),
                  [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
      }
    }
    parse_pre_tokenizer(j.find("pre_tokenizer"));
    if (!byte_level_) {
      throw Error(fmt::format("{}: pre_tokenizer: no ByteLevel step (only byte-level BPE is "
                              "supported)",
                              what_));
    }
  }

  std::vector<int64_t> encode(std::string_view text) const override {
    size_t bad = 0;
    if (!detail::valid_utf8(text, &bad)) {
      throw Error(fmt::format("tokenizer: the text is not valid UTF-8 (byte {})", bad));
    }
    std::vector<int64_t> ids;
    const auto pre_tokenize_and_merge = [&](std::string_view piece) { encode_segment(piece, ids); };
    split_at_added(text, added_in_raw_, ids, [&](std::string_view segment) {
      if (forms_.empty()) {
        split_at_added(segment, added_in_normalized_, ids, pre_tokenize_and_merge);
        return;
      }
      std::string normalized(segment);
      for (detail::UnicodeForm form : forms_) {
        normalized = detail::normalize_unicode(normalized, form);
      }
      split_at_added(normalized, added_in_normalized_, ids, pre_tokenize_and_merge);
    });
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string out;
    const ByteAlphabet& a = alphabet();
    for (int64_t id : ids) {
      auto added = added_by_id_.find(id);
      if (added != added_by_id_.end()) {
        out += added->second;
        continue;
      }
      auto it = by_id_.find(id);
      if (it == by_id_.end()) throw Error(fmt::format("tokenizer: no token has id {}", id));
      const std::string& token = it->second;
      for (size_t k = 0; k < token.size();) {
        const size_t n = utf8_length(static_cast<unsigned char>(token[k]));
        auto byte = a.to_byte.find(token.substr(k, n));
        if (byte == a.to_byte.end()) throw Error(fmt::format("tokenizer: token {} is not byte-level", id));
        out += static_cast<char>(byte->second);
        k += n;
      }
    }
    // Tokens may split a character: bytes that do not form one read as U+FFFD, as the
    // `tokenizers` package decodes them.
    return utf8_lossy(out);
  }

  int64_t vocab_size() const override { return max_id_ + 1; }
  std::optional<int64_t> token_id(const std::string& content) const override {
    auto it = added_.find(content);
    if (it != added_.end()) return it->second;
    return std::nullopt;
  }

 private:
  // Added tokens by their first byte, longest first.
  using AddedByFirstByte = std::map<unsigned char, std::vector<std::string>>;

  // Cuts `text` at the added tokens of `table` (leftmost, longest): their ids go to `ids`, the
  // text between them to `on_segment`, in order.
  template <class OnSegment>
  void split_at_added(std::string_view text, const AddedByFirstByte& table,
                      std::vector<int64_t>& ids, const OnSegment& on_segment) const {
    if (table.empty()) {
      on_segment(text);
      return;
    }
    size_t segment = 0, i = 0;
    while (i < text.size()) {
      const std::string* found = nullptr;
      auto it = table.find(static_cast<unsigned char>(text[i]));
      if (it != table.end()) {
        for (const std::string& t : it->second) {
          if (text.compare(i, t.size(), t) == 0) {
            found = &t;
            break;
          }
        }
      }
      if (!found) {
        ++i;
        continue;
      }
      on_segment(text.substr(segment, i - segment));
      ids.push_back(added_.at(*found));
      i += found->size();
      segment = i;
    }
    on_segment(text.substr(segment));
  }

  // The Unicode normalization forms, in order (a Sequence may hold several).
  void parse_normalizer(const std::optional<json_input::Node>& n) {
    if (!n) return;
    n->object();
    const std::string type = n->string_or("type", "");
    if (type == "Sequence") {
      const json_input::Node steps = n->at("normalizers");
      steps.array();
      for (size_t k = 0; k < steps.value().size(); ++k) parse_normalizer(steps.item(k));
    } else if (type == "NFC") {
      forms_.push_back(detail::UnicodeForm::nfc);
    } else if (type == "NFD") {
      forms_.push_back(detail::UnicodeForm::nfd);
    } else if (type == "NFKC") {
      forms_.push_back(detail::UnicodeForm::nfkc);
    } else if (type == "NFKD") {
      forms_.push_back(detail::UnicodeForm::nfkd);
    } else {
      n->fail(fmt::format("type '{}' is not supported (NFC, NFD, NFKC, NFKD, or a Sequence of them)",
                          type));
    }
  }

  void parse_pre_tokenizer(const std::optional<json_input::Node>& p) {
    if (!p) return;
    p->object();
    const std::string type = p->string_or("type", "");
    const std::string where = what_ + ": " + p->key();
    if (byte_level_) p->fail("a step after ByteLevel is not supported");
    if (type == "Sequence") {
      const json_input::Node steps = p->at("pretokenizers");
      steps.array();
      for (size_t k = 0; k < steps.value().size(); ++k) parse_pre_tokenizer(steps.item(k));
    } else if (type == "Split") {
      PreStep s{PreStep::Kind::split};
      const json_input::Node pattern = p->at("pattern");
      if (p->boolean_or("invert", false)) p->fail("invert: true is not supported");
      s.behavior = p->string_or("behavior", "Isolated");
      if (s.behavior != "Isolated" && s.behavior != "Removed" && s.behavior != "MergedWithPrevious" &&
          s.behavior != "MergedWithNext") {
        p->fail(fmt::format("behavior '{}' is not supported", s.behavior));
      }
      if (auto regex = pattern.find("Regex")) {
        s.regex = std::make_shared<detail::Regex>(regex->string(), false, where);
      } else {
        s.regex = std::make_shared<detail::Regex>(pattern.at("String").string(), true, where);
      }
      steps_.push_back(std::move(s));
    } else if (type == "Digits") {
      PreStep s{PreStep::Kind::digits};
      s.individual_digits = p->boolean_or("individual_digits", false);
      s.regex = std::make_shared<detail::Regex>(s.individual_digits ? "\\p{N}" : "\\p{N}+", false,
                                                where);
      steps_.push_back(std::move(s));
    } else if (type == "ByteLevel") {
      PreStep s{PreStep::Kind::byte_level};
      s.add_prefix_space = p->boolean_or("add_prefix_space", false);
      if (p->boolean_or("use_regex", true)) s.regex = std::make_shared<detail::Regex>(kGpt2Pattern, false, "GPT-2");
      steps_.push_back(std::move(s));
      byte_level_ = true;
    } else {
      p->fail(fmt::format("type '{}' is not supported (Sequence, Split, Digits, ByteLevel)", type));
    }
  }

  void encode_segment(std::string_view segment, std::vector<int64_t>& ids) const {
    if (segment.empty()) return;
    Pieces pieces{std::string(segment)};
    for (const PreStep& step : steps_) {
      Pieces next;
      for (std::string& piece : pieces) {
        if (step.kind == PreStep::Kind::byte_level && step.add_prefix_space &&
            piece.front() != ' ') {
          piece.insert(piece.begin(), ' ');
        }
        if (!step.regex) {
          next.push_back(std::move(piece));
          continue;
        }
        cut(piece, step.regex->find_all(piece), step.behavior, next);
      }
      pieces = std::move(next);
    }
    const ByteAlphabet& a = alphabet();
    for (const std::string& piece : pieces) {
      std::string mapped;
      for (unsigned char b : piece) mapped += a.of_byte[b];
      bpe(mapped, ids);
    }
  }

  // The piece's ids: the whole piece (ignore_merges), or its symbols merged by rank.
  void bpe(const std::string& piece, std::vector<int64_t>& ids) const {
    if (ignore_merges_) {
      auto it = vocab_.find(piece);
      if (it != vocab_.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(piece);
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<std::string> symbols;
    for (size_t k = 0; k < piece.size();) {
      const size_t n = utf8_length(static_cast<unsigned char>(piece[k]));
      symbols.push_back(piece.substr(k, n));
      k += n;
    }
    while (symbols.size() > 1) {
      int64_t best = -1;
      std::string best_key;
      for (size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = ranks_.find(symbols[k] + '\x01' + symbols[k + 1]);
        if (it != ranks_.end() && (best < 0 || it->second < best)) {
          best = it->second;
          best_key = it->first;
        }
      }
      if (best < 0) break;
      // Every occurrence of the best pair, left to right.
      std::vector<std::string> merged;
      for (size_t k = 0; k < symbols.size(); ++k) {
        if (k + 1 < symbols.size() && symbols[k] + '\x01' + symbols[k + 1] == best_key) {
          merged.push_back(symbols[k] + symbols[k + 1]);
          ++k;
        } else {
          merged.push_back(symbols[k]);
        }
      }
      symbols = std::move(merged);
    }
    std::vector<int64_t> out;
    for (const std::string& s : symbols) {
      auto it = vocab_.find(s);
      if (it != vocab_.end()) {
        out.push_back(it->second);
      } else if (unk_) {
        out.push_back(*unk_);
      } else {
        throw Error(fmt::format("{}: the symbol '{}' is not in the vocabulary (and no unk_token)",
                                what_, s));
      }
    }
    ids.insert(ids.end(), out.begin(), out.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < 1000000) cache_.emplace(piece, std::move(out));
  }

  std::string what_;
  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<std::string, int64_t> ranks_;  // "a\x01b" -> rank
  std::unordered_map<std::string, int64_t> added_;
  std::unordered_map<int64_t, std::string> added_by_id_;
  AddedByFirstByte added_in_raw_;         // not `normalized`: matched before the normalizer
  AddedByFirstByte added_in_normalized_;  // matched in the normalized text
  std::vector<detail::UnicodeForm> forms_;
  std::vector<PreStep> steps_;
  bool byte_level_ = false;
  bool ignore_merges_ = false;
  std::optional<int64_t> unk_;
  int64_t max_id_ = -1;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
  std::unordered_map<int64_t, std::string> by_id_;  // model.vocab inverted
};

bool is_sentencepiece_file(const fs::path& file) { return file.extension() == ".model"; }

// The tokenizer file of a folder: tokenizer.json (a Hugging Face folder may hold a
// tokenizer.model beside it, for the slow tokenizer; Tokenizer::load falls back to it), else
// tokenizer.model, else its one other *.model file (T5's spiece.model, ...).
fs::path tokenizer_file_in(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json")) return dir / "tokenizer.json";
  if (fs::exists(dir / "tokenizer.model")) return dir / "tokenizer.model";
  std::vector<fs::path> models;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && is_sentencepiece_file(entry.path())) {
      models.push_back(entry.path());
    }
  }
  if (ec) throw Error(fmt::format("{}: cannot list the folder: {}", dir.string(), ec.message()));
  if (models.size() == 1) return models.front();
  if (models.empty()) {
    throw Error(
        fmt::format("{}: no tokenizer.json and no SentencePiece *.model file in this folder "
                    "(expected one of them)",
                    dir.string()));
  }
  std::sort(models.begin(), models.end());
  throw Error(fmt::format(
      "{}: no tokenizer.json, and {} SentencePiece *.model files ({}, {}, ...): "
      "name the one to use",
      dir.string(), models.size(), models[0].filename().string(), models[1].filename().string()));
}

std::shared_ptr<Tokenizer> load_tokenizer_json(const fs::path& file) {
  json j;
  const std::string text = json_input::read_bounded(file, json_input::kTokenizerMaxBytes);
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{}: not valid JSON ({}); expected a tokenizer.json or a "
                    "SentencePiece .model file",
                    file.string(), e.what()));
  }
  return std::make_shared<BpeTokenizer>(json_input::Node(j, file.string()));
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::load(const fs::path& path) {
  if (!fs::exists(path)) {
    throw Error(
        fmt::format("{}: no such file or folder (expected a tokenizer.json, a SentencePiece "
                    ".model file, or a folder holding one)",
                    path.string()));
  }
  const fs::path file = fs::is_directory(path) ? tokenizer_file_in(path) : path;
  if (is_sentencepiece_file(file)) return detail::load_sentencepiece(file);
  const fs::path model = path / "tokenizer.model";
  if (fs::is_directory(path) && fs::exists(model)) {
    // Llama 2 and Mistral folders: their tokenizer.json is converted from the tokenizer.model
    // beside it, with normalizers (Prepend, Replace) and byte fallback that frugal's BPE does
    // not run; the model it came from does.
    try {
      return load_tokenizer_json(file);
    } catch (const Error& e) {
      log::warn(fmt::format("{}; using {} instead", e.what(), model.string()));
      return detail::load_sentencepiece(model);
    }
  }
  return load_tokenizer_json(file);
}

bool has_tokenizer_file(const fs::path& dir) {
  if (fs::exists(dir / "tokenizer.json")) return true;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && is_sentencepiece_file(entry.path())) return true;
  }
  return false;
}

TokenizerIdentity tokenizer_identity(const fs::path& path) {
  TokenizerIdentity out;
  out.file = fs::is_directory(path) ? tokenizer_file_in(path) : path;
  if (is_sentencepiece_file(out.file)) {
    out.hash = "fnv1a64:" + io::fnv1a64_hex(io::read_file(out.file));
    return out;
  }
  json j = json_input::parse_file(out.file, json_input::kTokenizerMaxBytes);
  // How a caller wants batches cut is not what the tokens are.
  if (j.is_object()) {
    j.erase("truncation");
    j.erase("padding");
  }
  out.hash = "fnv1a64:" + io::fnv1a64_hex(j.dump());  // objects dump with sorted keys
  return out;
}

int64_t end_of_text_token(const Tokenizer& tokenizer, const std::filesystem::path& dir) {
  // tokenizer_config.json's eos_token (a string, or {"content": ...}), else the one the
  // tokenizer file declares (a SentencePiece model's eos piece), else a common name.
  const auto config = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config)) {
    const auto doc = json_input::parse_file(config, json_input::kTokenizerConfigMaxBytes);
    const json_input::Node j(doc, config.string());
    j.object();
    if (auto e = j.find("eos_token")) {
      const std::string content = e->value().is_object() ? e->at("content").string() : e->string();
      if (auto id = tokenizer.token_id(content)) return *id;
      e->fail(fmt::format("'{}' is not a token of the tokenizer", content));
    }
  }
  if (auto id = tokenizer.end_of_text_id()) return *id;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (auto id = tokenizer.token_id(name)) return *id;
  }
  // Documents run together without one: refuse rather than write such a shard.
  throw Error(
      fmt::format("the tokenizer in '{}' has no end-of-text token (no "
                  "eos_token in tokenizer_config.json, no eos piece in the SentencePiece "
                  "model, none of <|endoftext|>, <|end_of_text|>, </s>)",
                  dir.string()));
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must fall in (which rules out
    // overlong forms, surrogates and code points past U+10FFFF); later bytes are 80..BF.
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    size_t k = 1;  // bytes of the sequence that are well formed so far
    while (n > 0 && k < n && i + k < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
      ++k;
    }
    if (n > 0 && k == n) {
      out.append(bytes.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += k;
  }
  return out;
}

}  // namespace frugal
