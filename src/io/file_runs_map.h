// Copy-on-write views of parts of a file, as tensors (private to src/). The optimizer state
// that NVMe offload keeps on disk is handed to a checkpoint this way: the writer reads each
// tensor through the page cache, which the kernel fills as it goes and may drop again, so a
// save holds no copy of the state in the process's own memory. The mapping is MAP_PRIVATE:
// a write to the tensor changes this process's copy of the page, never the file.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace frugal::io {

// The unit of a mapping: a mapped run's file offset, and the length of each run but the last,
// must be multiples of it (the page size, at least 4 KiB).
int64_t map_granularity();

// `bytes` rounded up to map_granularity().
int64_t map_aligned(int64_t bytes);

struct FileRun {
  int64_t offset = 0;  // in the file, a multiple of map_granularity()
  int64_t bytes = 0;   // a multiple of map_granularity() unless it is the last run
};

// The runs of a file mapped one after the other into one range of addresses; unmapped when the
// last owner (the tensors made over it hold one) lets go. An address range or a mapping the
// kernel refuses (vm.max_map_count, a filesystem without mmap) is a frugal::Error naming why.
class FileRunsMap {
 public:
  static std::shared_ptr<FileRunsMap> map(int fd, const std::vector<FileRun>& runs);
  ~FileRunsMap();
  FileRunsMap(const FileRunsMap&) = delete;
  FileRunsMap& operator=(const FileRunsMap&) = delete;

  std::byte* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  FileRunsMap(std::byte* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  std::byte* data_;
  int64_t bytes_;
};

// A CPU tensor over `map`'s bytes from `at` on (contiguous, owning its storage, so a writer
// takes it as it is), keeping the map alive.
at::Tensor tensor_over(const std::shared_ptr<FileRunsMap>& map, int64_t at,
                       const std::vector<int64_t>& sizes, at::ScalarType dtype);

}  // namespace frugal::io
