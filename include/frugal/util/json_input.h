// JSON documents from users' files (a Hugging Face folder's config.json, tokenizer.json,
// tokenizer_config.json, model.safetensors.index.json), read as hostile: the file's size is
// bounded before it is read, and every value is checked against its JSON type and range
// before use, so that a wrong document is a frugal::Error of one line naming the file and the
// key as the file spells it ("config.json: num_hidden_layers: expected an integer from 1 to
// 4096, got 2.5"), never nlohmann's type error (exit 1), a truncation or a default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace frugal::json_input {

// The bounds (docs/models.md, "Hostile files"): the largest real files are well below them
// (Llama 3's tokenizer.json is 9 MB, Gemma 3's 33 MB; a 670B model's index 9 MB), and parsing
// a document takes several times its size in memory.
inline constexpr int64_t kConfigMaxBytes = int64_t{4} << 20;            // config.json
inline constexpr int64_t kTokenizerConfigMaxBytes = int64_t{16} << 20;  // tokenizer_config.json
inline constexpr int64_t kIndexMaxBytes = int64_t{64} << 20;            // *.index.json
inline constexpr int64_t kTokenizerMaxBytes = int64_t{128} << 20;       // tokenizer.json

// The file's bytes: a regular file of at most max_bytes, else a frugal::Error naming it (a
// named pipe is refused rather than waited on).
std::string read_bounded(const std::filesystem::path& file, int64_t max_bytes);

// read_bounded, parsed; a syntax error is "<file>: not valid JSON (...)".
nlohmann::json parse_file(const std::filesystem::path& file, int64_t max_bytes);

// A value inside a document and where it is, for messages: "<file>: <key>: <message>", the key
// a path as the file spells it ("rope_parameters.factor", "added_tokens[3].id").
class Node {
 public:
  Node(const nlohmann::json& value, std::string file, std::string key = {})
      : value_(&value), file_(std::move(file)), key_(std::move(key)) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& key() const { return key_; }
  const std::string& file() const { return file_; }

  // The member `name` of this object (which must be one); missing is an error.
  Node at(const std::string& name) const;
  // The member when present and not null.
  std::optional<Node> find(const std::string& name) const;
  // Item i of this array.
  Node item(size_t i) const;
  // The path of member `name` / item i, for messages about values not read through a Node.
  std::string child_key(const std::string& name) const;

  // This value as the type; anything else (a float for an integer, a string for a number, a
  // number out of [lo, hi]) is an error naming the key and what was expected.
  int64_t integer(int64_t lo, int64_t hi) const;
  double number(double lo, double hi) const;  // an integer or a float, finite
  bool boolean() const;
  std::string string() const;
  const nlohmann::json& object() const;
  const nlohmann::json& array() const;

  // Member shortcuts: the value when present (not null), else `fallback`.
  int64_t integer_or(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  double number_or(const std::string& name, double fallback, double lo, double hi) const;
  bool boolean_or(const std::string& name, bool fallback) const;
  std::string string_or(const std::string& name, const std::string& fallback) const;

  [[noreturn]] void fail(const std::string& message) const;

 private:
  const nlohmann::json* value_;
  std::string file_;
  std::string key_;
};

// A value as a short text for messages: "2.5", "\"12\"", "an object"; long strings cut.
std::string describe(const nlohmann::json& value);

}  // namespace frugal::json_input
