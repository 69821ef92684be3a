// Unicode normalization (docs/data.md, "Tokenizers") through utf8proc_map, which works on a
// length, not a NUL-terminated string, so text holding NUL characters is normalized whole.
#include "unicode_normalize.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "frugal/util/error.h"

namespace frugal::detail {

std::string normalize_unicode(std::string_view text, UnicodeForm form) {
  if (text.empty()) return {};
  // STABLE: no composition that Unicode's stability policy forbids (as the standard forms).
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::nfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case UnicodeForm::nfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case UnicodeForm::nfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case UnicodeForm::nfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  // utf8proc allocates with malloc.
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0)
    throw Error(fmt::format("tokenizer: Unicode normalization failed ({})", utf8proc_errmsg(n)));
  return std::string(reinterpret_cast<const char*>(owned.get()), static_cast<size_t>(n));
}

}  // namespace frugal::detail
