#include "io/file_runs_map.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "frugal/util/error.h"

namespace frugal::io {

int64_t map_granularity() {
  static const int64_t page = std::max<int64_t>(::sysconf(_SC_PAGESIZE), 4096);
  return page;
}

int64_t map_aligned(int64_t bytes) {
  const int64_t g = map_granularity();
  return (bytes + g - 1) / g * g;
}

std::shared_ptr<FileRunsMap> FileRunsMap::map(int fd, const std::vector<FileRun>& runs) {
  int64_t total = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const bool last = i + 1 == runs.size();
    if (runs[i].offset % map_granularity() != 0 ||
        (!last && runs[i].bytes % map_granularity() != 0) || runs[i].bytes <= 0) {
      throw std::invalid_argument("FileRunsMap: a run is not aligned to the page size");
    }
    total += map_aligned(runs[i].bytes);
  }
  if (total == 0) total = map_granularity();
  const auto fail = [](const char* what) {
    const int err = errno;
    throw Error(fmt::format("cannot map the optimizer state file for reading ({}: {}){}", what,
                            std::strerror(err),
                            err == ENOMEM ? "; too many mappings: raise vm.max_map_count or "
                                            "strategy.offload.buffer_mb"
                                          : ""));
  };
  // The range is reserved first, then each run mapped over its place in it.
  void* base = ::mmap(nullptr, static_cast<size_t>(total), PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) fail("reserve");
  std::shared_ptr<FileRunsMap> out(new FileRunsMap(static_cast<std::byte*>(base), total));
  int64_t at = 0;
  for (const FileRun& run : runs) {
    void* p = ::mmap(out->data_ + at, static_cast<size_t>(map_aligned(run.bytes)),
                     PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, run.offset);
    if (p == MAP_FAILED) fail("mmap");
    at += map_aligned(run.bytes);
  }
  return out;
}

FileRunsMap::~FileRunsMap() { ::munmap(data_, static_cast<size_t>(bytes_)); }

at::Tensor tensor_over(const std::shared_ptr<FileRunsMap>& map, int64_t at,
                       const std::vector<int64_t>& sizes, at::ScalarType dtype) {
  return at::from_blob(
      map->data() + at, sizes, [keep = map](void*) mutable { keep.reset(); },
      at::TensorOptions().dtype(dtype));
}

}  // namespace frugal::io
