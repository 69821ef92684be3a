// The Unicode normalization forms of tokenizer.json's normalizers (NFC, NFD, NFKC, NFKD), on
// utf8proc's tables (Debian's libutf8proc), never hand-written ones.
#pragma once

#include <string>
#include <string_view>

namespace frugal::detail {

enum class UnicodeForm { nfc, nfd, nfkc, nfkd };

// `text` (valid UTF-8) in the normalization form `form`.
std::string normalize_unicode(std::string_view text, UnicodeForm form);

}  // namespace frugal::detail
