// SentencePiece .model files (Tokenizer::load through libsentencepiece): the bounded read and
// the library's own parsing, then an encode and a decode, every id inside the vocabulary.
#include "frugal/data/tokenizer.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(sentencepiece) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string path =
        frugal::fuzz::write_scratch_file("tokenizer.model", frugal::fuzz::as_text(data, size));
    const auto tokenizer = frugal::Tokenizer::load(path);
    const auto ids = tokenizer->encode("abc H\xC3\xA9llo 12345  x</s>");
    for (int64_t id : ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) {
        throw std::logic_error("an id outside the tokenizer's own vocabulary");
      }
    }
    tokenizer->decode(ids);
    tokenizer->end_of_text_id();
  });
}
