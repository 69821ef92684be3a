// memory.host_allocator: `tuned` keeps activation-sized blocks in glibc's heap for reuse
// instead of an mmap / munmap per allocation. Each measurement runs in a process of its own
// (support/fresh_process.h): malloc's settings are the whole process's.
#include <catch2/catch.hpp>

#include <cstdlib>

// What glibc's malloc does; under ASan or TSan their own allocator serves malloc instead.
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define FRUGAL_TEST_GLIBC_MALLOC 1
#include <malloc.h>
#endif

#include "frugal/memory/host_allocator.h"
#include "frugal/util/error.h"
#include "support/fresh_process.h"

#if defined(FRUGAL_TEST_GLIBC_MALLOC)
namespace test_host_allocator {
// Bytes glibc holds in mmapped blocks while 8 MiB are allocated (and touched).
size_t mmapped_while_holding_8mib() {
  void* p = std::malloc(8 << 20);
  static_cast<volatile char*>(p)[0] = 1;
  const size_t held = mallinfo2().hblkhd;
  std::free(p);
  return held;
}
}  // namespace test_host_allocator

TEST_CASE("the tuned host allocator serves 8 MiB blocks from the heap", "[unit][memory]") {
  if (!frugal::test::in_fresh_process()) return;
  frugal::memory::tune_host_allocator("tuned");
  CHECK(test_host_allocator::mmapped_while_holding_8mib() < (8u << 20));
}

TEST_CASE("the system host allocator leaves glibc's mmap of large blocks", "[unit][memory]") {
  if (!frugal::test::in_fresh_process()) return;
  frugal::memory::tune_host_allocator("system");
  // A fresh process: glibc's first threshold is 128 KiB, so 8 MiB comes from mmap.
  CHECK(test_host_allocator::mmapped_while_holding_8mib() >= (8u << 20));
}
#endif

TEST_CASE("an unknown host allocator policy names the key", "[unit][memory][bad_input]") {
  CHECK_THROWS_WITH(frugal::memory::tune_host_allocator("jemalloc"),
                    "memory.host_allocator: unknown policy 'jemalloc' (expected tuned or system)");
}
