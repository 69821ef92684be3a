// SentencePiece models (docs/data.md, "Tokenizers") run by Debian's libsentencepiece, the
// library the `sentencepiece` Python package wraps: normalization, BPE or unigram
// segmentation and byte fallback are its own, so the ids are its ids, not a re-implementation.
#include "sentencepiece_tokenizer.h"

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <string>
#include <vector>

#include "frugal/util/error.h"
#include "regex_split.h"
#include "frugal/util/json_input.h"

namespace frugal::detail {
namespace {

// Linking libsentencepiece corrupts one of libc10's flags, and this puts it back. Both
// libraries export a global `FLAGS_minloglevel`: libc10's is a 4-byte int, Debian's
// libsentencepiece's a 32-byte absl::Flag object. libc10 comes first in the lookup order, so
// SentencePiece's static constructor builds its object over libc10's int and the bytes after
// it, one of which is `FLAGS_caffe2_use_fatal_for_enforce`: left non-zero, every failed
// CAFFE_ENFORCE (among them a CPU allocation that fails) aborts the process with SIGABRT
// instead of throwing c10::Error. The constructors of a library run after those of the
// libraries it links, so this one runs after SentencePiece's and restores libc10's default.
// (The byte is also part of the vtable pointer of SentencePiece's flag object, which the
// library only reads through non-virtual calls.)
[[maybe_unused]] const bool g_enforce_throws = [] {
  FLAGS_caffe2_use_fatal_for_enforce = false;
  return true;
}();

// A SentencePiece model is a few MiB (Gemma's, 256000 pieces: 4 MiB); read like tokenizer.json,
// up to the same bound.
constexpr int64_t kMaxModelBytes = json_input::kTokenizerMaxBytes;

// The library's messages may span lines and end in spaces; frugal's errors are one line.
std::string one_line_status(const sentencepiece::util::Status& status) {
  std::string message = status.ToString();
  std::replace(message.begin(), message.end(), '\n', ' ');
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& file) : what_(file.string()) {
    // Read by frugal, parsed by the library: a missing or unreadable file gets frugal's
    // message, a corrupt one the library's.
    const std::string bytes = json_input::read_bounded(file, kMaxModelBytes);
    sentencepiece::util::Status status;
    try {
      status = processor_.LoadFromSerializedProto(bytes);
    } catch (const std::exception& e) {
      // Some malformed models get past the library's checks and throw from inside it (its
      // double-array trie refuses an empty piece: "failed to insert key: zero-length key").
      fail_load(e.what());
    }
    if (!status.ok()) fail_load(one_line_status(status));
  }

  std::vector<int64_t> encode(std::string_view text) const override {
    // As for tokenizer.json: the library would silently replace bad bytes, which hides a
    // wrong input encoding.
    size_t bad = 0;
    if (!valid_utf8(text, &bad)) {
      throw Error(fmt::format("tokenizer: the text is not valid UTF-8 (byte {})", bad));
    }
    std::vector<int> ids;
    const auto status = library_call([&] { return processor_.Encode(text, &ids); });
    if (!status.ok()) {
      throw Error(fmt::format("{}: encode failed ({})", what_, one_line_status(status)));
    }
    return {ids.begin(), ids.end()};
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int> narrow;
    narrow.reserve(ids.size());
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size()) {
        throw Error(fmt::format("tokenizer: no token has id {}", id));
      }
      narrow.push_back(static_cast<int>(id));
    }
    std::string text;
    const auto status = library_call([&] { return processor_.Decode(narrow, &text); });
    if (!status.ok()) {
      throw Error(fmt::format("{}: decode failed ({})", what_, one_line_status(status)));
    }
    return text;
  }

  int64_t vocab_size() const override { return processor_.GetPieceSize(); }

  std::optional<int64_t> token_id(const std::string& content) const override {
    // PieceToId answers unk_id for an unknown piece; only the unknown piece itself maps there.
    const int id = processor_.PieceToId(content);
    if (id < 0) return std::nullopt;
    if (id == processor_.unk_id() && processor_.IdToPiece(id) != content) return std::nullopt;
    return id;
  }

  std::optional<int64_t> end_of_text_id() const override {
    const int id = processor_.eos_id();  // -1: the model was trained without one
    if (id < 0) return std::nullopt;
    return id;
  }

 private:
  // A library call whose exception (a model that loaded but is inconsistent) becomes a failed
  // status naming the file, as its own failures are.
  template <class Call>
  sentencepiece::util::Status library_call(const Call& call) const {
    try {
      return call();
    } catch (const std::exception& e) {
      return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, e.what());
    }
  }

  [[noreturn]] void fail_load(const std::string& says) const {
    std::string one_line = says;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    throw Error(
        fmt::format("{}: not a valid SentencePiece model (expected a serialized ModelProto, as "
                    "spm_train writes; the library says: {})",
                    what_, one_line));
  }

  std::string what_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::shared_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& file) {
  return std::make_shared<SentencePieceTokenizer>(file);
}

}  // namespace frugal::detail
