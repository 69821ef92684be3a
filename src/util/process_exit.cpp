#include "frugal/util/process_exit.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cuda/cuda_runtime.h"

// GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang answers __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FRUGAL_EXIT_NORMALLY 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FRUGAL_EXIT_NORMALLY 1
#endif

namespace frugal {

void exit_process(int code) {
#ifdef FRUGAL_EXIT_NORMALLY
  std::exit(code);
#else
  if (cuda::load_state().loaded) std::exit(code);
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}

}  // namespace frugal
