// frugal's version, as the top-level CMakeLists.txt's project() names it (the only place it is
// written): `frugal --version`, run reports, the installed package's frugalConfigVersion.cmake.
#pragma once

namespace frugal {

const char* version();

}  // namespace frugal
