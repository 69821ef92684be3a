// Deleting a directory tree without std::filesystem::remove_all. The torch 2.11 wheel's
// libtorch.so and libtorch_cpu.so export their own, older copies of libstdc++'s std::filesystem
// functions (pytorch/pytorch#133437); they interpose on the system ones in every binary linked
// with torch, and remove_all() on a non-empty directory then crashes (SIGSEGV). Other
// std::filesystem calls tested fine (status, exists, create_directories, directory iterators,
// rename, remove, file_size), but remove_all must not be used in frugal.
#pragma once

#include <filesystem>

namespace frugal::io {

// Removes `path` and, if it is a directory, everything below it; symlinks are removed, not
// followed. A missing path is not an error; any other failure throws frugal::Error naming the
// entry that could not be removed.
void remove_tree(const std::filesystem::path& path);

}  // namespace frugal::io
