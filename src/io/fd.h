// Private to src/io: a file descriptor that closes itself, and errno-preserving helpers, for
// code that needs strerror in its messages (iostreams hide errno) or fsync.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace frugal::io::detail {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // close(2) can report a deferred write error (NFS), so writers check it.
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Returns 0 or the errno of the failed write; retries short writes and EINTR.
inline int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace frugal::io::detail
