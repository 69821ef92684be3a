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

}  // namespace frugal::memory
