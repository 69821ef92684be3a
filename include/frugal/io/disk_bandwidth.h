// `frugal doctor --disk DIR`: the sequential bandwidth a folder's disk gives direct I/O (the
// transfers NVMe offload and asynchronous checkpoints make), measured through the same engine
// (io/direct_io.h): a scratch file written in blocks with several in flight, synced, read
// back, checked and removed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace frugal::io {

struct DiskBandwidth {
  int64_t bytes = 0;             // moved each way
  int64_t block = 0;             // per transfer
  int depth = 0;                 // transfers in flight
  double write_bytes_per_s = 0;  // write + fsync
  double read_bytes_per_s = 0;
  bool direct = false;           // O_DIRECT (false: the filesystem refused it; cached figures)
  std::string backend;           // io_uring or threads
  std::string fallback_reason;   // why not io_uring, when not
};

// Measures `bytes` (rounded up to whole blocks) in `block`-byte transfers, `depth` in flight,
// in a scratch file under `dir` that is removed afterwards, also on failure. A missing or
// unwritable folder, a full disk or data read back different from what was written are a
// frugal::Error naming the folder.
DiskBandwidth measure_disk(const std::filesystem::path& dir, int64_t bytes,
                           int64_t block = int64_t{1} << 20, int depth = 8);

}  // namespace frugal::io
