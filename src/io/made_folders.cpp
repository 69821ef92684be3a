#include "io/made_folders.h"

#include <fmt/format.h>

#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::io {

MadeFolders::~MadeFolders() {
  if (keep_) return;
  std::error_code ec;  // not empty (someone else wrote there) or gone: left as it is
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) fs::remove(*it, ec);
}

void MadeFolders::make(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.insert(missing.begin(), p);
    if (p == p.parent_path()) break;
  }
  for (const fs::path& p : missing) {
    std::error_code ec;
    fs::create_directory(p, ec);
    if (ec) throw Error(fmt::format("cannot create directory '{}': {}", p.string(), ec.message()));
    made_.push_back(p);
  }
}

}  // namespace frugal::io
