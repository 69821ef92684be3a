#include "frugal/memory/host_allocator.h"

#include <fmt/format.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "frugal/util/error.h"

namespace frugal::memory {

void tune_host_allocator(const std::string& policy) {
  if (policy == "system") return;
  if (policy != "tuned") {
    throw Error(fmt::format("memory.host_allocator: unknown policy '{}' (expected tuned or system)",
                            policy));
  }
#if defined(__GLIBC__)
  // Fixing the mmap threshold also turns off glibc's dynamic adjustment of it.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void return_freed_blocks() {
#if defined(__GLIBC__)
  // glibc's first threshold, fixed: every block above it is mmapped and unmapped when freed,
  // and a fixed threshold no longer rises (to 32 MiB) after the first such free.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  malloc_trim(0);
#endif
}

}  // namespace frugal::memory
