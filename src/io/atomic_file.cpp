// POSIX calls rather than iostreams: iostreams hide errno (so no "No space left on device" in
// the message) and have no fsync.
#include "frugal/io/atomic_file.h"

#include "made_folders.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fd.h"
#include "save_faults.h"
#include "frugal/util/error.h"

namespace frugal::io {
namespace fs = std::filesystem;
using detail::Fd;
using detail::write_all;

namespace {

[[noreturn]] void fail(std::string_view action, const fs::path& path, int err) {
  throw Error(fmt::format("cannot {} '{}': {}", action, path.string(), std::strerror(err)));
}

fs::path parent_or_dot(const fs::path& path) {
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A name no other writer uses: two processes (or threads) writing the same target at once must
// not share a temp file. The leading dot keeps it out of casual listings.
fs::path temp_name_for(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  return parent_or_dot(path) / fmt::format(".{}.tmp.{}.{}", path.filename().string(),
                                           static_cast<long>(::getpid()), counter++);
}

// Creates the temp file; O_EXCL so a stale file of the same name is never reused.
int open_temp(const fs::path& target, fs::path& temp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp = temp_name_for(target);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

void fsync_file(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail("open", path, errno);
  if (::fsync(fd.get()) != 0) fail("sync", path, errno);
}

}  // namespace

void write_file_atomic_stream(const fs::path& path,
                              const std::function<void(const ByteSink&)>& fill) {
  fs::path temp;
  Fd fd(open_temp(path, temp));
  if (fd.get() < 0) fail("write", path, errno);
  int err = 0;
  try {
    fill([&](std::string_view bytes) {
      if (err == 0) err = write_all(fd.get(), bytes);
      if (err != 0) fail("write", path, err);
    });
  } catch (...) {
    // The producer's failure (or a full disk) leaves no temp file and `path` as it was.
    fd.close();
    ::unlink(temp.c_str());
    throw;
  }
  if (::fsync(fd.get()) != 0) err = errno;
  if (fd.close() != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(temp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    fail("write", path, err);
  }
  fsync_directory(parent_or_dot(path));
}

void write_file_atomic_parts(const fs::path& path, const std::vector<std::string_view>& parts) {
  write_file_atomic_stream(path, [&](const ByteSink& write) {
    for (std::string_view part : parts) write(part);
  });
}

void write_file_synced(const fs::path& path, std::string_view bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (fd.get() < 0) fail("write", path, errno);
  int err = detail::write_checkpoint_bytes(fd.get(), bytes, write_all);
  if (err == 0 && ::fsync(fd.get()) != 0) err = errno;
  if (fd.close() != 0 && err == 0) err = errno;
  if (err != 0) {
    // A part written on a full disk would hold on to the space the next attempt needs.
    ::unlink(path.c_str());
    fail("write", path, err);
  }
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  write_file_atomic_parts(path, {bytes});
}

void create_directories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("create directory", dir, ec.value());
}

std::string read_file(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail("read", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("read", path, errno);
  if (S_ISDIR(st.st_mode)) fail("read", path, EISDIR);
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("read", path, errno);
    }
    if (n == 0) return out;
    out.append(buffer, static_cast<size_t>(n));
  }
}

void fsync_directory(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail("sync directory", dir, errno);
  // Some filesystems cannot sync a directory and say so with EINVAL; their renames are as
  // durable as they will ever be, so that is not an error.
  if (::fsync(fd.get()) != 0 && errno != EINVAL) fail("sync directory", dir, errno);
}

void publish_directory_atomic(const fs::path& tmp_dir, const fs::path& final_dir) {
  std::error_code ec;
  if (!fs::is_directory(tmp_dir, ec)) {
    throw Error(fmt::format("cannot publish '{}': not a directory", tmp_dir.string()));
  }
  if (fs::exists(fs::symlink_status(final_dir, ec))) {
    throw Error(fmt::format("cannot publish '{}' as '{}': the target already exists",
                            tmp_dir.string(), final_dir.string()));
  }
  // Contents first, then the directories holding them, so that after the rename nothing
  // inside can still be lost.
  for (auto it = fs::recursive_directory_iterator(tmp_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec))
      fsync_file(it->path());
    else if (it->is_directory(ec))
      fsync_directory(it->path());
  }
  if (ec) fail("list", tmp_dir, ec.value());
  fsync_directory(tmp_dir);
  // RENAME_NOREPLACE closes the race between the check above and the rename: plain rename(2)
  // would silently replace an empty directory created in between.
  auto rename_failed = [&](int err) {
    if (err == EEXIST || err == ENOTEMPTY) {
      return Error(fmt::format("cannot publish '{}' as '{}': the target already exists",
                               tmp_dir.string(), final_dir.string()));
    }
    return Error(fmt::format("cannot rename '{}' to '{}': {}", tmp_dir.string(), final_dir.string(),
                             std::strerror(err)));
  };
  if (::renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    // Filesystems without RENAME_NOREPLACE: fall back on the check made above.
    if (err != EINVAL && err != ENOSYS) throw rename_failed(err);
    if (std::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) throw rename_failed(errno);
  }
  fsync_directory(parent_or_dot(final_dir));
}

void write_directory_atomic(const std::filesystem::path& out,
                            const std::function<void(const std::filesystem::path& tmp)>& fill) {
  std::filesystem::path tmp = out;
  tmp += ".tmp-export";
  if (std::filesystem::exists(tmp)) std::filesystem::remove_all(tmp);
  MadeFolders made;  // tmp and the output's missing parents, removed on failure
  made.make(tmp);
  try {
    fill(tmp);
    publish_directory_atomic(tmp, out);
    made.keep();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace frugal::io
