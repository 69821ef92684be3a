#include "files.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <system_error>

#include "frugal/util/error.h"

namespace frugal::detail {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> regular_files(const std::string& dir, const std::string& key) {
  std::unique_ptr<DIR, int (*)(DIR*)> handle(::opendir(dir.c_str()), &::closedir);
  if (!handle) {
    throw Error(
        fmt::format("{}: cannot open '{}': {}", key, dir, std::generic_category().message(errno)));
  }
  std::string prefix = dir.ends_with('/') ? dir : dir + "/";
  std::vector<std::string> files;
  while (const dirent* entry = ::readdir(handle.get())) {
    std::string path = prefix + entry->d_name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) files.push_back(std::move(path));
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string file_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace frugal::detail
