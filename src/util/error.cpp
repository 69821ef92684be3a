#include "frugal/util/error.h"

namespace frugal {

std::string located(const std::string& file, int line, int column, const std::string& message) {
  std::string out = file.empty() ? std::string("<config>") : file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out + ": " + message;
}

}  // namespace frugal
