// Variable-length batches across ranks (frugal_dist_worker masked): a small Llama on padded and
// packed rows with a third of the targets ignored, accumulation 3, under ddp and zero3, with
// and without full checkpointing, at world 2: every step's loss is PyTorch's mean
// cross-entropy with ignore_index over the global batch, and the parameters after 3 steps
// equal one process's.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

TEST_CASE("padded and packed batches with ignored targets under ddp and zero3 at world 2",
          "[multiproc][dist][llama]") {
  CommandResult r = launch(2, quote(dist_worker()) + " masked", 180);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto j = rank0_report(r.out);
  REQUIRE(j.at("max_diff").size() == 4);
  for (const auto& [variant, diff] : j.at("max_diff").items()) {
    INFO(variant);
    CHECK(diff.get<double>() < 1e-5);
    CHECK(j.at("loss_diff").at(variant).get<double>() < 1e-6);
  }
  // Padding plus a third of the real targets: well over a third ignored.
  CHECK(j.at("ignored_fraction").get<double>() > 0.33);
}
