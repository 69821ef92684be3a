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

}  // namespace frugal
