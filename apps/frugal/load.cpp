#include "load.h"

#include "frugal/config/load.h"

namespace frugal::cli {
namespace {

// configs/default.yaml, embedded at build time (see CMakeLists.txt).
const char* const kDefaultConfig =
#include "default_config.inc"
    ;

}  // namespace

Config load(const ConfigSource& src) {
  if (src.path.empty()) return load_config_string(kDefaultConfig, "<built-in default>", src.overrides);
  return load_config(src.path, src.overrides);
}

}  // namespace frugal::cli
