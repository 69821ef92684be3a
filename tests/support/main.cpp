#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "support/skip.h"

int main(int argc, char* argv[]) {
  // Tests compare numbers bit for bit; pin the thread count so results don't depend on the
  // machine's core count.
  at::set_num_threads(2);
  return frugal::test::exit_code_with_skips(Catch::Session().run(argc, argv));
}
