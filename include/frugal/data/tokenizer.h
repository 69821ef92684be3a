// Tokenizers of real models, two kinds behind one interface:
// - Hugging Face `tokenizer.json` files: byte-level BPE as GPT-2, Llama 3, SmolLM2 and Qwen2.5
//   use it. Text is cut at the added (special) tokens, Unicode-normalized when the file says
//   so (NFC, ...), split by the pre-tokenizer's regular expressions (PCRE2 with Unicode
//   properties: the same patterns `tokenizers` runs), each piece mapped to GPT-2's byte
//   alphabet and merged by the BPE merge ranks. The ids equal the `tokenizers` package's for
//   the supported configurations (tests/integration/test_tokenizer.cpp); anything else in the
//   file is a frugal::Error naming the file and the field, not an approximation.
// - SentencePiece `.model` files (Llama 2, Mistral, T5, Gemma): BPE or unigram, run by the
//   SentencePiece library itself, so the ids are the `sentencepiece` package's
//   (tests/integration/test_tokenizer.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace frugal {

class Tokenizer {
 public:
  // `path`: a tokenizer.json, a SentencePiece `*.model` file, or a folder holding either
  // (tokenizer.json when it holds both). Anything else is a frugal::Error naming the path.
  static std::shared_ptr<Tokenizer> load(const std::filesystem::path& path);
  virtual ~Tokenizer() = default;

  // Token ids of `text`, without any special token added around it.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // One more than the largest id (the shard's token width follows from it).
  virtual int64_t vocab_size() const = 0;
  // The id of a token by its content: an added token of a tokenizer.json ("<|endoftext|>"),
  // any piece of a SentencePiece model ("</s>"); nullopt when there is none.
  virtual std::optional<int64_t> token_id(const std::string& content) const = 0;
  // The end-of-sequence token the tokenizer file itself declares (a SentencePiece model's eos
  // piece), or nullopt: a tokenizer.json declares none (tokenizer_config.json names it).
  virtual std::optional<int64_t> end_of_text_id() const { return std::nullopt; }
};

// `bytes` as valid UTF-8: each maximal ill-formed subpart replaced by U+FFFD (Unicode's
// "substitution of maximal subparts", as Python's bytes.decode("utf-8", "replace") and Rust's
// String::from_utf8_lossy do it, and so the `tokenizers` package's byte-level decoding): what
// decode() gives for tokens that split a character.
std::string utf8_lossy(std::string_view bytes);

// The end-of-text id of the tokenizer in folder `dir`: tokenizer_config.json's eos_token, else
// the one the tokenizer file declares, else <|endoftext|>, <|end_of_text|> or </s>; a
// frugal::Error naming the folder when it has none.
int64_t end_of_text_token(const Tokenizer& tokenizer, const std::filesystem::path& dir);

// Whether folder `dir` holds a tokenizer file Tokenizer::load would look for (tokenizer.json or
// a SentencePiece *.model).
bool has_tokenizer_file(const std::filesystem::path& dir);

// The file that defines the tokenizer at `path` (a file, or a folder: its tokenizer.json, else
// its SentencePiece model), and that file's identity for telling two tokenizers apart:
// "fnv1a64:<16 hex digits>" of a tokenizer.json's content as parsed (so formatting, key order
// and its truncation / padding settings do not count) or of a SentencePiece model's bytes.
// Token shards record it (prepare-text), so that training can refuse a model whose tokenizer
// is another one. A frugal::Error names the file that cannot be read.
struct TokenizerIdentity {
  std::filesystem::path file;
  std::string hash;
};
TokenizerIdentity tokenizer_identity(const std::filesystem::path& path);

}  // namespace frugal
