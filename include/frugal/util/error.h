// One exception type for everything a user can cause (bad config, missing file, corrupt
// checkpoint). The CLI catches it once, prints what() as one line and exits with code 2;
// anything else escaping is an internal error (exit 1).
#pragma once

#include <stdexcept>
#include <string>

namespace frugal {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "file:line:column: message" (line and column 1-based; omitted when unknown, i.e. <= 0).
std::string located(const std::string& file, int line, int column, const std::string& message);

// A message's first line: c10's errors carry a C++ backtrace after it, and frugal's own errors
// are one line (the CLI's, and a failed rank's last words under `frugal launch`).
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace frugal
