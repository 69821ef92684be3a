// Private to src/io. Test hooks, for tests/integration/test_checkpoint_faults.cpp only: they make
// a checkpoint's write stop part way, as a crash or a full disk would, at a byte the test
// chooses. Both are off unless set in the environment, and count the bytes this process wrote
// into checkpoints (io::write_file_synced) since it started:
//   FRUGAL_FAULT_SAVE_EXIT_AFTER_BYTES=N    once N bytes are written, _exit(kSaveFaultExitCode):
//                                           no destructor, no flush, no clean-up, as a crash
//   FRUGAL_FAULT_SAVE_ENOSPC_AFTER_BYTES=N  every write past the first N bytes fails with ENOSPC
#pragma once

#include <string_view>

namespace frugal::io::detail {

inline constexpr int kSaveFaultExitCode = 86;

// Writes `bytes` to `fd` with `writer`, unless a hook stops it part way; returns 0 or the
// errno of the failed write.
int write_checkpoint_bytes(int fd, std::string_view bytes, int (*writer)(int, std::string_view));

}  // namespace frugal::io::detail
