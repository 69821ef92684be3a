#include "save_faults.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "frugal/util/error.h"

namespace frugal::io::detail {
namespace {

// -1: not set. A value that is not a byte count is an error rather than a hook quietly off.
int64_t fault_byte_limit(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0) {
    throw Error(fmt::format("{}='{}': expected a byte count (a test hook)", name, v));
  }
  return n;
}

struct SaveFaultHooks {
  int64_t exit_after = fault_byte_limit("FRUGAL_FAULT_SAVE_EXIT_AFTER_BYTES");
  int64_t enospc_after = fault_byte_limit("FRUGAL_FAULT_SAVE_ENOSPC_AFTER_BYTES");
};

const SaveFaultHooks& save_fault_hooks() {
  static const SaveFaultHooks h;
  return h;
}

std::atomic<int64_t> g_checkpoint_bytes_written{0};

}  // namespace

int write_checkpoint_bytes(int fd, std::string_view bytes, int (*writer)(int, std::string_view)) {
  const SaveFaultHooks& h = save_fault_hooks();
  if (h.exit_after < 0 && h.enospc_after < 0) return writer(fd, bytes);
  const int64_t before = g_checkpoint_bytes_written.fetch_add(static_cast<int64_t>(bytes.size()));
  const int64_t after = before + static_cast<int64_t>(bytes.size());
  auto prefix_up_to = [&](int64_t limit) {
    return bytes.substr(0, static_cast<size_t>(std::max<int64_t>(0, limit - before)));
  };
  if (h.exit_after >= 0 && after >= h.exit_after) {
    (void)writer(fd, prefix_up_to(h.exit_after));
    ::_exit(kSaveFaultExitCode);
  }
  if (h.enospc_after >= 0 && after > h.enospc_after) {
    if (int err = writer(fd, prefix_up_to(h.enospc_after)); err != 0) return err;
    return ENOSPC;
  }
  return writer(fd, bytes);
}

}  // namespace frugal::io::detail
