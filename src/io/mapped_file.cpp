#include "io/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "frugal/util/error.h"

namespace frugal::detail {

namespace {

[[noreturn]] void fail(const std::string& key, const std::string& path, int error) {
  throw Error(
      fmt::format("{}: cannot open '{}': {}", key, path, std::generic_category().message(error)));
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path,
                                                   const std::string& key) {
  // O_NONBLOCK: opening a named pipe would otherwise wait for a writer, forever (it is then
  // refused below, as it cannot be mapped); for a regular file the flag changes nothing.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(key, path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int error = errno;
    ::close(fd);
    fail(key, path, error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) fail(key, path, EISDIR);
    throw Error(fmt::format("{}: cannot open '{}': not a regular file (a pipe, socket or device "
                            "cannot be mapped)",
                            key, path));
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<int64_t>(st.st_size);
  if (file->size_ > 0) {  // mmap of length 0 is an error; an empty file maps to nothing
    void* p = ::mmap(nullptr, static_cast<size_t>(file->size_), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      fail(key, path, error);
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

}  // namespace frugal::detail
