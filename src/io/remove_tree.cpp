#include "frugal/io/remove_tree.h"

#include <fmt/format.h>
#include <ftw.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "frugal/util/error.h"

namespace frugal::io {
namespace {

// nftw's callback cannot capture; the entry that failed is handed back through this.
thread_local std::string failed_entry;

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  if (std::remove(path) == 0 || errno == ENOENT) return 0;
  failed_entry = path;
  return errno;  // nonzero: stops the walk and becomes nftw's result
}

}  // namespace

void remove_tree(const std::filesystem::path& path) {
  failed_entry.clear();
  // FTW_DEPTH: children before their directory; FTW_PHYS: never follow symlinks out of the tree.
  int rc = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc == 0) return;
  int err = rc > 0 ? rc : errno;
  if (rc < 0 && err == ENOENT) return;  // nothing there to begin with
  throw Error(fmt::format("cannot remove '{}': {}",
                          failed_entry.empty() ? path.string() : failed_entry, std::strerror(err)));
}

}  // namespace frugal::io
