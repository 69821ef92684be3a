// Crash-safe file output. A reader of `path` sees either the old content or the complete new
// content, never a prefix: bytes go to a temp file in the same directory (same filesystem, so
// rename(2) is atomic), the file is fsynced, renamed over `path`, and the directory is fsynced
// so the rename itself survives a power loss. Failures throw frugal::Error naming the path and
// strerror, and leave neither a temp file nor a changed `path` behind.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::io {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// The same, for content that exists as several pieces (a header and tensor storages): written
// in order, without first concatenating them into one buffer.
void write_file_atomic_parts(const std::filesystem::path& path,
                             const std::vector<std::string_view>& parts);
// The same, for content made piece by piece (an export reading one tensor at a time): fill
// calls write(bytes) for each piece, in order; nothing is kept. An exception from fill leaves
// no temp file and `path` as it was, and goes on.
using ByteSink = std::function<void(std::string_view)>;
void write_file_atomic_stream(const std::filesystem::path& path,
                              const std::function<void(const ByteSink& write)>& fill);

// A plain write (O_TRUNC, no temp file) with fsync, for files inside a directory that is
// published whole (a checkpoint's staging directory). On failure the file is removed and a
// frugal::Error names it with strerror ("No space left on device"). Checkpoint bytes go through
// here, and so do the save fault hooks of the reliability tests (src/io/save_faults.h).
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);

// std::filesystem::create_directories with a frugal::Error naming the directory and strerror
// ("cannot create directory 'X': Read-only file system") instead of a filesystem_error.
void create_directories(const std::filesystem::path& dir);

// The whole file; "cannot read 'X': No such file or directory" (strerror) when it can't.
std::string read_file(const std::filesystem::path& path);

// fsync(2) on a directory: makes the creation, removal and renaming of its entries durable.
void fsync_directory(const std::filesystem::path& dir);

// Publishes a fully written directory (a checkpoint) under its final name: fsyncs every regular
// file below tmp_dir, renames tmp_dir -> final_dir and fsyncs final_dir's parent. final_dir must
// not exist (throws frugal::Error otherwise); both must be on the same filesystem.
void publish_directory_atomic(const std::filesystem::path& tmp_dir,
                              const std::filesystem::path& final_dir);

// Writes a new folder `out` (exports): fill(tmp) writes its files into the temporary sibling
// `<out>.tmp-export`, which is then published whole (publish_directory_atomic). On any failure
// the temporary folder, and the parents of `out` it had to make, are removed and the error
// goes on: no half-written folder is left.
void write_directory_atomic(const std::filesystem::path& out,
                            const std::function<void(const std::filesystem::path& tmp)>& fill);

}  // namespace frugal::io
