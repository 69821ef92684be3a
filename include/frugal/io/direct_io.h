// Direct I/O for data larger than host memory wants to cache (optimizer state on NVMe, large
// checkpoints): files opened with O_DIRECT, so that transfers go between the disk and frugal's
// own buffers without passing through (and evicting) the page cache, and an engine that keeps
// several transfers in flight. The engine submits through io_uring (Debian's liburing) and,
// where the kernel or a seccomp policy refuses io_uring, through a small pool of threads
// calling pread/pwrite, saying so once. O_DIRECT wants buffers, offsets and sizes aligned to
// the device's block: every transfer here is aligned to kDirectAlignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace frugal::io {

// The alignment of buffers, offsets and sizes of direct transfers (4 KiB: the logical block of
// NVMe drives and of the page size, which covers 512-byte devices too).
inline constexpr int64_t kDirectAlignment = 4096;

// `bytes` rounded up to kDirectAlignment.
inline int64_t direct_aligned(int64_t bytes) {
  return (bytes + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
}

// Host memory for a buffer: `data` holds the bytes asked for and `owner` keeps them alive.
struct HostBlock {
  std::shared_ptr<void> owner;
  std::byte* data = nullptr;
};
using HostAllocate = std::function<HostBlock(int64_t bytes)>;

// Host memory aligned for direct transfers, zero-filled, freed with the object. It comes from
// torch's CPU allocator, so that frugal's CPU memory tracking and memory.budget count it (the
// NVMe offload's ring is part of a run's host memory), unless the caller gives its own.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes);  // rounded up to kDirectAlignment
  // The same, in memory `allocate` gives (NVMe offload on CUDA: page-locked memory, so that
  // copies between the buffer and the device run by DMA); empty: torch's CPU allocator.
  AlignedBuffer(int64_t bytes, const HostAllocate& allocate);
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();
  std::byte* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  std::shared_ptr<void> owner_;  // what the allocator gave (data_ is aligned inside it)
  std::byte* data_ = nullptr;
  int64_t size_ = 0;
};

// A file for direct transfers. A filesystem that refuses O_DIRECT gets the file without it
// (direct() false: transfers then go through the page cache) unless `require_direct`, which
// makes that a frugal::Error naming the file.
class DirectFile {
 public:
  // write: created (or truncated) for reading and writing; update: an existing file, for
  // reading and writing in place.
  enum class Mode { read, write, update };
  DirectFile(const std::filesystem::path& path, Mode mode, bool require_direct = false);
  // A file in the folder `dir` without a name (O_TMPFILE), for reading and writing: gone with
  // its descriptor however the process ends, a SIGKILL included. Messages call it `dir`/`name`
  // (path()). Where the filesystem has no unnamed files, it is `dir`/`name`.PID.N, removed as
  // soon as it is open (a kill between the two leaves it behind).
  static DirectFile unnamed(const std::filesystem::path& dir, const std::string& name,
                            bool require_direct = false);
  ~DirectFile();
  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&&) = delete;
  DirectFile(const DirectFile&) = delete;

  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  const std::filesystem::path& path() const { return path_; }
  // Sets the file's length (after writing a last block past the data: the data's own length).
  void truncate(int64_t bytes) const;
  // fsync: the data is on the device.
  void sync() const;

 private:
  DirectFile() = default;
  // Opens with `open_at(flags)`: O_DIRECT first, then without it where the filesystem refuses
  // it (EINVAL) and `require_direct` allows. 0, or the errno of the open that failed.
  template <typename Open>
  int try_open(Open open_at, int flags, bool require_direct);
  // The frugal::Error for try_open's `err`, naming path_ and what the file was opened for.
  [[noreturn]] void throw_open_error(int err, bool require_direct, const char* what) const;

  std::filesystem::path path_;
  int fd_ = -1;
  bool direct_ = false;
};

// Transfers in flight, completed in any order, waited for by ticket. One thread submits and
// waits (the engine is not shared between threads); the buffers must outlive the transfer.
class IoEngine {
 public:
  enum class Backend { io_uring, threads };
  // `depth`: transfers in flight at most (submitting one more waits for the oldest).
  // `prefer` threads skips io_uring (and FRUGAL_IO_BACKEND=threads in the environment does for
  // every engine: how a user forces the fallback, and the tests try it).
  explicit IoEngine(int depth = 8, Backend prefer = Backend::io_uring);
  ~IoEngine();
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  Backend backend() const;
  // Why io_uring is not used ("" when it is, or when threads were asked for).
  const std::string& fallback_reason() const;

  // Starts reading (writing) `bytes` at `offset` of `file` into (from) `buffer`; all three
  // aligned to kDirectAlignment, else a frugal::Error. Returns the ticket to wait for.
  uint64_t read(const DirectFile& file, std::byte* buffer, int64_t bytes, int64_t offset);
  uint64_t write(const DirectFile& file, const std::byte* buffer, int64_t bytes, int64_t offset);
  // Waits until the transfer is done; a failed or short one (a read past the end, a full disk)
  // is a frugal::Error naming the file, the offset and the reason.
  void wait(uint64_t ticket);
  // Waits for every transfer in flight (the first failure is thrown after all have ended).
  void wait_all();
  // Transfers started and not yet waited for.
  int64_t in_flight() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

const char* backend_name(IoEngine::Backend backend);

}  // namespace frugal::io
