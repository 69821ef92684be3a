// The folders made for an output (its missing parents), removed again unless the output is
// published: a command that fails after making them leaves nothing behind (`frugal
// prepare-text -o data/new/tokens.bin`, `frugal export -o exports/new/folder`).
#pragma once

#include <filesystem>
#include <vector>

namespace frugal::io {

class MadeFolders {
 public:
  MadeFolders() = default;
  MadeFolders(const MadeFolders&) = delete;
  MadeFolders& operator=(const MadeFolders&) = delete;
  // Removes what make() created (innermost first, each only while empty) unless kept.
  ~MadeFolders();

  // Makes `dir` and its missing parents, recording each; one that cannot be made is a
  // frugal::Error naming it.
  void make(const std::filesystem::path& dir);
  // The output is published: the folders stay.
  void keep() { keep_ = true; }

 private:
  std::vector<std::filesystem::path> made_;  // outermost first
  bool keep_ = false;
};

}  // namespace frugal::io
