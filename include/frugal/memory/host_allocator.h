// How the process's C allocator (glibc malloc) treats the large blocks tensors come and go in.
//
// By default glibc serves blocks above a dynamic threshold (128 KiB at first) with mmap, and
// gives them back with munmap when freed; memory freed at the top of the heap is returned too.
// A training step allocates and frees the same activation-sized blocks every step, so each
// step pays page faults and page zeroing for memory it just gave back. `tuned` keeps blocks
// up to 64 MiB in the heap for reuse and returns the heap's free top only past 256 MiB:
// measured on the strategies benchmark's GPT in bf16, median step 0.64 s against 0.75 s
// (docs/benchmarks.md). The cost: up to that much freed memory stays resident.
//   tuned   mmap threshold 64 MiB, trim threshold 256 MiB (memory.host_allocator default)
//   system  glibc's own defaults, untouched
#pragma once

#include <string>

namespace frugal::memory {

// Applies the policy to this process (a no-op for `system`, and where the C library is not
// glibc). An unknown name is a frugal::Error naming memory.host_allocator.
void tune_host_allocator(const std::string& policy);

// While a model is built and its weights loaded: every freed block goes back to the system at
// once (the whole model a rank builds before keeping its shard, read buffers), so that the
// resident peak follows the live tensors; what the heap already holds free is returned too.
// The trainer applies memory.host_allocator's policy once loading is over.
void return_freed_blocks();

}  // namespace frugal::memory
