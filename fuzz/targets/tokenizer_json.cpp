// tokenizer.json (Tokenizer::load): the bounded read, the BPE tables' checks (ids, merges,
// added tokens), the normalizer and pre-tokenizer steps with their regular expressions; a
// tokenizer that loads then encodes a text touching every step (added tokens, digits,
// non-ASCII, spaces) and decodes what it wrote, and every id is inside its vocabulary.
#include <filesystem>

#include "frugal/data/tokenizer.h"
#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(tokenizer_json) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const std::string path =
        frugal::fuzz::write_scratch_file("tokenizer.json", frugal::fuzz::as_text(data, size));
    const auto tokenizer = frugal::Tokenizer::load(path);
    const auto ids = tokenizer->encode("abc <|endoftext|> H\xC3\xA9llo 12345  \tx\r\n</s>");
    for (int64_t id : ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) {
        throw std::logic_error("an id outside the tokenizer's own vocabulary");
      }
    }
    tokenizer->decode(ids);
  });
}
