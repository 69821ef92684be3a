// Cases that need a process's first state. CTest runs a test file's cases in one process
// (tests/CMakeLists.txt): what one case changes for the whole process (glibc's malloc settings,
// its mmap threshold, which rises as mmapped blocks are freed) reaches the cases after it.
#pragma once

namespace frugal::test {

// Runs the current case again, alone, in a new process of this test binary, and checks that it
// passed there; false in the process that called it (the case then returns), true in the new
// one, where the case does its work:
//   if (!in_fresh_process()) return;
bool in_fresh_process();

}  // namespace frugal::test
