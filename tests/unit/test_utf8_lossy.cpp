// Decoded bytes that are not UTF-8 read as U+FFFD per maximal ill-formed subpart, as Python's
// bytes.decode("utf-8", "replace") and the `tokenizers` package's byte-level decoder give them
// (the expected strings below are Python's).
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "frugal/data/tokenizer.h"

TEST_CASE("utf8_lossy replaces maximal ill-formed subparts as Python does", "[unit][tokenizer]") {
  const std::string r = "\xEF\xBF\xBD";
  const std::pair<std::string, std::string> cases[] = {
      {"ab\xF1\xF1"
       "c",
       "ab" + r + r + "c"},                 // two lone leads
      {"\xE2\x82", r},                      // a character cut short: one replacement
      {"\xE2\x82\xAC", "\xE2\x82\xAC"},     // whole: kept
      {"\xED\xA0\x80", r + r + r},          // a surrogate: not a prefix of anything valid
      {"\xF0\x80\x80", r + r + r},          // overlong
      {"\xF4\x90\x80\x80", r + r + r + r},  // past U+10FFFF
      {"\xC0\xAF", r + r},
      {"\xE0\xA0", r},
      {"\xF0\x9F\x98\x80x\x80", "\xF0\x9F\x98\x80x" + r},
      {"\xC3", r},
      {"plain text", "plain text"},
  };
  for (const auto& [bytes, expected] : cases) {
    INFO(bytes);
    CHECK(frugal::utf8_lossy(bytes) == expected);
  }
}
