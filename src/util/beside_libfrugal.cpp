#include "util/beside_libfrugal.h"

#include <dlfcn.h>

namespace frugal {

std::filesystem::path beside_libfrugal(const char* file_name) {
  // libfrugal's own file, wherever it was installed or bundled: the one holding this function.
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&beside_libfrugal), &self) == 0 || self.dli_fname == nullptr) {
    return file_name;
  }
  return std::filesystem::path(self.dli_fname).parent_path() / file_name;
}

}  // namespace frugal
