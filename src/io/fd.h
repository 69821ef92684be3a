// Private to src/io: a file descriptor that closes itself, and errno-preserving helpers, for
// code that needs strerror in its messages (iostreams hide errno) or fsync.
#pragma once

#include <unistd.h>

namespace frugal::io::detail {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
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

}  // namespace frugal::io::detail
