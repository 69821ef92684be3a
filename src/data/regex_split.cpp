#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex_split.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "frugal/util/error.h"

namespace frugal::detail {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& what)
    : code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              options, &error, &offset, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("{}: the pattern does not compile at offset {}: {}", what, offset,
                            reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // the interpreter serves where JIT can't
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  size_t start = 0;
  while (start <= text.size()) {
    // The text was checked once (valid_utf8): no check per match.
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                               start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw Error(fmt::format("tokenizer: regular expression failed (PCRE2 error {})", rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) {
      // An empty match: step over one character.
      size_t next = ov[0] + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      start = next;
      continue;
    }
    out.emplace_back(ov[0], ov[1]);
    start = ov[1];
  }
  pcre2_match_data_free(md);
  return out;
}

bool valid_utf8(std::string_view text, size_t* bad_at) {
  // RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF (PCRE2 is told not to
  // check again).
  size_t i = 0;
  auto cont = [&](size_t k) { return (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80; };
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      n = 1, cp = c;
    } else if ((c >> 5) == 0x6) {
      n = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c >> 4) == 0xE) {
      n = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c >> 3) == 0x1E) {
      n = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) {
      ok = cont(i + k);
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

}  // namespace frugal::detail
