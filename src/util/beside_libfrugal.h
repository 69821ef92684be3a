// Internal: the path of a library installed, built or bundled in libfrugal's own folder, for
// the libraries libfrugal loads at run time (dlopen) instead of linking: TensorBoard's event
// encoding, the CUDA runtime.
#pragma once

#include <filesystem>

namespace frugal {

// `<libfrugal's folder>/<file_name>`; just `file_name` (left to dlopen's search) when the
// folder cannot be found.
std::filesystem::path beside_libfrugal(const char* file_name);

}  // namespace frugal
