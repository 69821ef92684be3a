// Regular expressions as `tokenizers` runs them in pre-tokenizers: PCRE2 in UTF mode with
// Unicode properties (\p{L}, \p{N}, \s over all of Unicode), JIT-compiled where available.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace frugal::detail {

class Regex {
 public:
  // `literal`: the pattern is a plain string. A pattern PCRE2 refuses is a frugal::Error
  // naming `what` and the offset.
  Regex(const std::string& pattern, bool literal, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every non-empty, non-overlapping match in `text` (valid UTF-8), as byte ranges.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

// Whether `text` is valid UTF-8; on failure `bad_at` is the offset of the first bad byte.
bool valid_utf8(std::string_view text, size_t* bad_at);

}  // namespace frugal::detail
