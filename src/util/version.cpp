#include "frugal/util/version.h"

namespace frugal {

// FRUGAL_VERSION is defined for this file alone by src/CMakeLists.txt from PROJECT_VERSION.
const char* version() { return FRUGAL_VERSION; }

}  // namespace frugal
