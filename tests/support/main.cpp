#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <torch/torch.h>

int main(int argc, char* argv[]) {
  // Tests compare numbers bit for bit; pin the thread count so results don't depend on the
  // machine's core count.
  torch::set_num_threads(2);
  return Catch::Session().run(argc, argv);
}
