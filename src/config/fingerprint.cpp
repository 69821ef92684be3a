// A hash of what decides the numbers training produces, to refuse (or warn about) resuming a
// run under a different configuration. Paths, names, logging, checkpoint cadence and loader
// parallelism don't change the numbers, so they are left out; model.size is left out because
// the sizes it expands to are hashed themselves.
#include <fmt/format.h>

#include "frugal/config/load.h"
#include "internal.h"

namespace frugal {

std::string config_fingerprint(const Config& config) {
  const std::string text =
      config_detail::dump(config, [](std::string_view section, std::string_view key) {
        if (section == "model") return key != "size";
        if (section == "data") return key != "num_workers" && key != "pin_memory";
        return section == "optim" || section == "schedule" || section == "strategy";
      });
  // FNV-1a, 64 bits: tiny, stable across platforms and releases (std::hash is neither).
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace frugal
