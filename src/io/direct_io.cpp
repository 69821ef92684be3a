#include "frugal/io/direct_io.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal::io {
namespace {

// One transfer's size at most: io_uring takes 32-bit lengths, and a ring of buffers moves far
// smaller pieces anyway.
constexpr int64_t kMaxTransfer = int64_t{1} << 30;

// Test hooks (tests/unit/test_direct_io.cpp), off unless set in the environment:
//   FRUGAL_FAULT_NO_ODIRECT=1                 opening with O_DIRECT fails with EINVAL, as on a
//                                             filesystem without it
//   FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES=N  direct writes past the first N bytes this process
//                                             started fail with ENOSPC, as on a filling disk
bool fault_no_odirect() {
  const char* v = std::getenv("FRUGAL_FAULT_NO_ODIRECT");
  return v && std::string(v) == "1";
}

// Whether a write of `bytes` more would pass the injected ENOSPC limit (and counts it). The
// count starts again whenever the variable is unset, so that the tests of one process that set
// it each start from an empty disk.
bool fault_disk_full(int64_t bytes) {
  static std::atomic<int64_t> written{0};
  const char* v = std::getenv("FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES");
  if (!v) {
    written.store(0);
    return false;
  }
  return written.fetch_add(bytes) + bytes > std::atoll(v);
}

struct Request {
  uint64_t ticket = 0;
  bool write = false;
  int fd = -1;
  std::byte* buffer = nullptr;
  int64_t bytes = 0;
  int64_t offset = 0;
  std::string file;
};

// pread/pwrite until all of the request moved, from `done` bytes on: the bytes moved, or
// -errno. A read that meets the end of the file stops there (fewer bytes than asked).
int64_t transfer_rest(const Request& r, int64_t done) {
  while (done < r.bytes) {
    const ssize_t n = r.write ? ::pwrite(r.fd, r.buffer + done, r.bytes - done, r.offset + done)
                              : ::pread(r.fd, r.buffer + done, r.bytes - done, r.offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;  // the end of the file (a write of 0 bytes would loop: report it short)
    done += n;
  }
  return done;
}

}  // namespace

AlignedBuffer::AlignedBuffer(int64_t bytes) : AlignedBuffer(bytes, HostAllocate()) {}

AlignedBuffer::AlignedBuffer(int64_t bytes, const HostAllocate& allocate)
    : size_(direct_aligned(bytes)) {
  if (size_ == 0) return;
  // Over-allocated by one alignment: torch's allocator aligns to 64 bytes only. The block's
  // owner is kept whole, so that it is freed by the allocator that gave it.
  HostBlock got;
  const int64_t room = size_ + kDirectAlignment;
  if (allocate) {
    got = allocate(room);
  } else {
    try {
      auto ptr = std::make_shared<c10::DataPtr>(c10::GetCPUAllocator()->allocate(static_cast<size_t>(room)));
      got.data = static_cast<std::byte*>(ptr->get());
      got.owner = std::move(ptr);
    } catch (const c10::Error& e) {
      throw Error(fmt::format("cannot allocate {} bytes of aligned host memory: {}", size_,
                              e.what_without_backtrace()));
    }
  }
  const auto at = reinterpret_cast<uintptr_t>(got.data);
  data_ = got.data + (kDirectAlignment - static_cast<int64_t>(at % kDirectAlignment)) % kDirectAlignment;
  owner_ = std::move(got.owner);
  std::memset(data_, 0, static_cast<size_t>(size_));
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : owner_(std::move(other.owner_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  owner_ = std::move(other.owner_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

AlignedBuffer::~AlignedBuffer() = default;

template <typename Open>
int DirectFile::try_open(Open open_at, int flags, bool require_direct) {
  int err = EINVAL;
  if (!fault_no_odirect()) {
    fd_ = open_at(flags | O_DIRECT | O_CLOEXEC);
    err = fd_ >= 0 ? 0 : errno;
  }
  direct_ = fd_ >= 0;
  // EINVAL is a filesystem without O_DIRECT (some FUSE and network filesystems).
  if (fd_ < 0 && err == EINVAL && !require_direct) {
    fd_ = open_at(flags | O_CLOEXEC);
    err = fd_ >= 0 ? 0 : errno;
  }
  return err;
}

void DirectFile::throw_open_error(int err, bool require_direct, const char* what) const {
  if (err == EINVAL && require_direct)
    throw Error(fmt::format("{}: the filesystem refuses direct I/O (O_DIRECT)", path_.string()));
  throw Error(fmt::format("{}: cannot open for {}: {}", path_.string(), what, std::strerror(err)));
}

DirectFile::DirectFile(const std::filesystem::path& path, Mode mode, bool require_direct)
    : path_(path) {
  const int flags = mode == Mode::read     ? O_RDONLY
                    : mode == Mode::update ? O_RDWR
                                           : (O_RDWR | O_CREAT | O_TRUNC);
  const int err =
      try_open([&](int f) { return ::open(path.c_str(), f, 0644); }, flags, require_direct);
  if (err != 0) throw_open_error(err, require_direct, mode == Mode::read ? "reading" : "writing");
}

DirectFile DirectFile::unnamed(const std::filesystem::path& dir, const std::string& name,
                               bool require_direct) {
  DirectFile file;
  file.path_ = dir / name;
  const int err = file.try_open([&](int f) { return ::open(dir.c_str(), f, 0600); },
                                O_RDWR | O_TMPFILE, require_direct);
  if (err == 0) return file;
  // A filesystem without unnamed files says EOPNOTSUPP (a kernel before 3.11: EISDIR).
  if (err != EOPNOTSUPP && err != EISDIR) file.throw_open_error(err, require_direct, "writing");
  static std::atomic<int> counter{0};
  const auto path = dir / fmt::format("{}.{}.{}", name, ::getpid(), counter++);
  DirectFile named(path, Mode::write, require_direct);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  named.path_ = file.path_;
  return named;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), direct_(other.direct_) {
  other.fd_ = -1;
}

void DirectFile::truncate(int64_t bytes) const {
  if (::ftruncate(fd_, bytes) != 0)
    throw Error(fmt::format("{}: cannot set its length: {}", path_.string(), std::strerror(errno)));
}

void DirectFile::sync() const {
  if (::fsync(fd_) != 0)
    throw Error(fmt::format("{}: fsync failed: {}", path_.string(), std::strerror(errno)));
}

// What both back ends share: the requests in flight and the completions not yet waited for.
struct IoEngine::Impl {
  virtual ~Impl() = default;
  // Starts `r`; reap() later returns its ticket with the bytes moved or -errno.
  virtual void submit(const Request& r) = 0;
  virtual std::pair<uint64_t, int64_t> reap() = 0;  // blocks for one completion

  Backend backend = Backend::threads;
  std::string reason;
  int depth = 8;
  uint64_t next_ticket = 1;
  std::unordered_map<uint64_t, Request> pending;
  std::unordered_map<uint64_t, int64_t> finished;
};

namespace {

class UringImpl final : public IoEngine::Impl {
 public:
  // False (and `why`) when the kernel or a seccomp policy refuses io_uring: the ring's setup
  // and a no-op through it, so that a ring that is set up but cannot enter fails here.
  bool start(int entries, std::string& why) {
    int rc = io_uring_queue_init(static_cast<unsigned>(entries), &ring_, 0);
    if (rc < 0) {
      why = fmt::format("io_uring_setup: {}", std::strerror(-rc));
      return false;
    }
    live_ = true;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, 0);
    rc = io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    if (rc >= 0) rc = wait_cqe(&cqe);
    if (rc < 0) {
      why = fmt::format("io_uring_enter: {}", std::strerror(-rc));
      return false;
    }
    io_uring_cqe_seen(&ring_, cqe);
    return true;
  }
  ~UringImpl() override {
    if (live_) io_uring_queue_exit(&ring_);
  }

  void submit(const Request& r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // never full: at most `depth` in flight
    if (!sqe) throw Error("io_uring: no free submission entry");
    if (r.write) {
      io_uring_prep_write(sqe, r.fd, r.buffer, static_cast<unsigned>(r.bytes),
                          static_cast<uint64_t>(r.offset));
    } else {
      io_uring_prep_read(sqe, r.fd, r.buffer, static_cast<unsigned>(r.bytes),
                         static_cast<uint64_t>(r.offset));
    }
    io_uring_sqe_set_data64(sqe, r.ticket);
    int rc;
    do {
      rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    if (rc < 0) throw Error(fmt::format("{}: io_uring_submit: {}", r.file, std::strerror(-rc)));
  }

  std::pair<uint64_t, int64_t> reap() override {
    io_uring_cqe* cqe = nullptr;
    const int rc = wait_cqe(&cqe);
    if (rc < 0) throw Error(fmt::format("io_uring_wait_cqe: {}", std::strerror(-rc)));
    const std::pair<uint64_t, int64_t> out{io_uring_cqe_get_data64(cqe), cqe->res};
    io_uring_cqe_seen(&ring_, cqe);
    return out;
  }

 private:
  int wait_cqe(io_uring_cqe** cqe) {
    int rc;
    do {
      rc = io_uring_wait_cqe(&ring_, cqe);
    } while (rc == -EINTR);
    return rc;
  }

  io_uring ring_{};
  bool live_ = false;
};

class ThreadImpl final : public IoEngine::Impl {
 public:
  explicit ThreadImpl(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadImpl() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void submit(const Request& r) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(r);
    }
    work_cv_.notify_one();
  }

  std::pair<uint64_t, int64_t> reap() override {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return !done_.empty(); });
    const auto out = done_.front();
    done_.pop_front();
    return out;
  }

 private:
  void work() {
    for (;;) {
      Request r;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        r = std::move(queue_.front());
        queue_.pop_front();
      }
      const int64_t res = transfer_rest(r, 0);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.emplace_back(r.ticket, res);
      }
      done_cv_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Request> queue_;
  std::deque<std::pair<uint64_t, int64_t>> done_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

const char* backend_name(IoEngine::Backend backend) {
  return backend == IoEngine::Backend::io_uring ? "io_uring" : "threads";
}

IoEngine::IoEngine(int depth, Backend prefer) {
  if (depth < 1) throw Error(fmt::format("io engine: depth must be >= 1, got {}", depth));
  const char* forced = std::getenv("FRUGAL_IO_BACKEND");
  if (forced && std::string(forced) == "threads") prefer = Backend::threads;
  std::string why;
  if (prefer == Backend::io_uring) {
    auto uring = std::make_unique<UringImpl>();
    if (uring->start(depth, why)) {
      impl_ = std::move(uring);
      impl_->backend = Backend::io_uring;
    }
  }
  if (!impl_) {
    impl_ = std::make_unique<ThreadImpl>(depth);
    impl_->backend = Backend::threads;
    impl_->reason = why;
    // Refused (not asked for): said once per process, as the first engine meets it.
    static std::atomic<bool> said{false};
    if (!why.empty() && !said.exchange(true)) {
      log::warn(fmt::format("direct I/O: io_uring refused ({}): transfers go through a pool of "
                            "threads calling pread/pwrite",
                            why));
    }
  }
  impl_->depth = depth;
}

IoEngine::~IoEngine() {
  // Buffers may be freed right after: nothing may still be moving into them.
  try {
    wait_all();
  } catch (const std::exception&) {
  }
}

IoEngine::Backend IoEngine::backend() const { return impl_->backend; }
const std::string& IoEngine::fallback_reason() const { return impl_->reason; }
int64_t IoEngine::in_flight() const { return static_cast<int64_t>(impl_->pending.size()); }

namespace {

uint64_t start(IoEngine::Impl& impl, Request r) {
  const char* what = r.write ? "write" : "read";
  if (r.bytes <= 0 || r.bytes > kMaxTransfer || r.bytes % kDirectAlignment != 0 || r.offset < 0 ||
      r.offset % kDirectAlignment != 0 ||
      reinterpret_cast<uintptr_t>(r.buffer) % kDirectAlignment != 0) {
    throw Error(
        fmt::format("{}: a direct {} of {} bytes at offset {} must be aligned to {} "
                    "(buffer, offset and size) and at most {} bytes",
                    r.file, what, r.bytes, r.offset, kDirectAlignment, kMaxTransfer));
  }
  // At most `depth` in flight: the oldest completion makes room.
  while (static_cast<int64_t>(impl.pending.size() - impl.finished.size()) >= impl.depth) {
    const auto [ticket, res] = impl.reap();
    impl.finished[ticket] = res;
  }
  r.ticket = impl.next_ticket++;
  impl.pending[r.ticket] = r;
  if (r.write && fault_disk_full(r.bytes)) {
    impl.finished[r.ticket] = -ENOSPC;  // (a test hook: never started)
    return r.ticket;
  }
  try {
    impl.submit(impl.pending[r.ticket]);
  } catch (...) {
    impl.pending.erase(r.ticket);  // never started: nothing to wait for
    throw;
  }
  return r.ticket;
}

}  // namespace

uint64_t IoEngine::read(const DirectFile& file, std::byte* buffer, int64_t bytes, int64_t offset) {
  return start(*impl_, Request{0, false, file.fd(), buffer, bytes, offset, file.path().string()});
}

uint64_t IoEngine::write(const DirectFile& file, const std::byte* buffer, int64_t bytes,
                         int64_t offset) {
  // (pwrite and io_uring only read the buffer)
  return start(*impl_, Request{0, true, file.fd(), const_cast<std::byte*>(buffer), bytes, offset,
                               file.path().string()});
}

void IoEngine::wait(uint64_t ticket) {
  Impl& impl = *impl_;
  const auto it = impl.pending.find(ticket);
  if (it == impl.pending.end()) throw Error(fmt::format("io engine: no transfer {}", ticket));
  while (!impl.finished.count(ticket)) {
    const auto [t, res] = impl.reap();
    impl.finished[t] = res;
  }
  const Request r = std::move(it->second);
  int64_t res = impl.finished.at(ticket);
  impl.pending.erase(ticket);
  impl.finished.erase(ticket);
  // A partial transfer (an interrupted one) goes on synchronously; what is still short then is
  // the end of the file or the device.
  if (res >= 0 && res < r.bytes) res = transfer_rest(r, res);
  const char* what = r.write ? "write" : "read";
  if (res < 0) {
    throw Error(fmt::format("{}: {} of {} bytes at offset {} failed: {}", r.file, what, r.bytes,
                            r.offset, std::strerror(static_cast<int>(-res))));
  }
  if (res < r.bytes) {
    throw Error(fmt::format("{}: {} of {} bytes at offset {} stopped after {} bytes ({})", r.file,
                            what, r.bytes, r.offset, res,
                            r.write ? "the device is full" : "the file ends there"));
  }
}

void IoEngine::wait_all() {
  std::vector<uint64_t> tickets;
  for (const auto& [t, _] : impl_->pending) tickets.push_back(t);
  std::exception_ptr first;
  for (uint64_t t : tickets) {
    try {
      wait(t);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace frugal::io
