// Ending a process that links frugal: its main returns through here.
#pragma once

namespace frugal {

// Flushes C's and C++'s standard streams and ends the process with `code`, without running
// the static destructors of the libraries it loaded. libtorch's take half of a short process's
// life: they deregister every operator it registered at start (~0.27 s of a 0.55 s
// `frugal --version` on a 2-core machine; a test run starts ~1,000 processes). Everything
// frugal writes is flushed as it goes (the logger flushes each line; files are closed by the
// objects that wrote them, which main's own scope has destroyed by then).
//
// Exits normally (std::exit) where work is registered for the end: a process that loaded the
// CUDA libraries (the CUDA runtime's teardown, profilers' flush: Nsight, CUPTI), and builds
// with a sanitizer (LeakSanitizer checks at exit).
[[noreturn]] void exit_process(int code);

}  // namespace frugal
