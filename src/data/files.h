// File-system helpers on POSIX calls (private to src/data). Not std::filesystem: the torch
// wheel's libtorch.so exports its own, older std::filesystem functions, which take precedence
// over libstdc++'s at run time, and some of them crash (remove_all calls a null pointer).
#pragma once

#include <string>
#include <vector>

namespace frugal::detail {

bool is_directory(const std::string& path);  // following symlinks; false when missing
bool exists(const std::string& path);        // anything at all, even a dangling symlink

// The regular files (symlinks followed) directly in `dir`, as "dir/name", sorted by name.
// Throws frugal::Error "<key>: cannot open '<dir>': <reason>".
std::vector<std::string> regular_files(const std::string& dir, const std::string& key);

// The last component of `path` ("a/b.bin" -> "b.bin").
std::string file_name(const std::string& path);

}  // namespace frugal::detail
