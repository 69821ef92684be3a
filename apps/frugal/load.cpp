#include "load.h"

#include "frugal/config/load.h"
#include "frugal/hf/folder.h"

namespace frugal::cli {
namespace {

// configs/default.yaml, embedded at build time (see CMakeLists.txt).
const char* const kDefaultConfig =
#include "default_config.inc"
    ;

}  // namespace

Config load(const ConfigSource& src) {
  if (src.path.empty()) return load_config_string(kDefaultConfig, "<built-in default>", src.overrides);
  Config cfg = load_config(src.path, src.overrides);
  // plan and find-batch build (or trace) models of the config's sizes: a folder's config.json
  // is checked against its weights first, as training does.
  if (!cfg.model.init_from.empty()) hf::check_architecture(cfg.model, cfg.model.init_from);
  return cfg;
}

}  // namespace frugal::cli
