#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include <cstdlib>

#include "frugal/util/process_exit.h"
#include "support/skip.h"

int main(int argc, char* argv[]) {
  // Tests compare numbers bit for bit; pin the thread count so results don't depend on the
  // machine's core count. FRUGAL_TEST_THREADS=1: no OpenMP workers (tools/sanitize.sh tsan).
  const char* threads = std::getenv("FRUGAL_TEST_THREADS");
  at::set_num_threads(threads != nullptr && std::atoi(threads) > 0 ? std::atoi(threads) : 2);
  // (without libtorch's static destructors: frugal::exit_process)
  frugal::exit_process(frugal::test::exit_code_with_skips(Catch::Session().run(argc, argv)));
}
