#pragma once

#include "commands.h"
#include "frugal/config/config.h"

namespace frugal::cli {

// The config file given, or the built-in default (a char-level GPT on the fortunes corpus
// that Debian's `fortunes` package installs) when none is. A model.init_from folder's sizes are
// checked against its weights (hf::check_architecture).
Config load(const ConfigSource& src);

}  // namespace frugal::cli
