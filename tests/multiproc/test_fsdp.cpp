// zero1, zero2 and zero3 at 1, 2 and 4 ranks on Gloo. The worker (frugal_dist_worker fsdp)
// trains a small GPT under each mode, with and without accumulation (gradients kept sharded or
// whole meanwhile) and checkpointing, and checks on every rank:
// - the parameters after 4 steps equal one process's on the same global batch (fp32, 1e-5);
// - the state each rank keeps equals ZeRO's formula (16Ψ, what is sharded divided by N);
// - the bytes sent per step equal 2Ψ (zero1/2) or 3Ψ (zero3's blocks; 2Ψ for its root unit);
// - zero3 gathers at most a few units at once.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

TEST_CASE("zero1/2/3 at world 1, 2 and 4 equal one process, with ZeRO's memory and traffic",
          "[multiproc][dist][fsdp]") {
  for (int n : {1, 2, 4}) {
    SECTION("world " + std::to_string(n)) {
      CommandResult r = launch(n, quote(dist_worker()) + " fsdp", 240);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      auto j = rank0_report(r.out);
      REQUIRE(j.at("max_diff").size() == 15);
      for (const auto& [variant, diff] : j.at("max_diff").items()) {
        INFO(variant);
        CHECK(diff.get<double>() < 1e-5);
      }
      for (const char* mode : {"zero1", "zero2", "zero3"}) {
        CHECK(j.at("state_ratio").at(mode).get<double>() == Approx(1.0).margin(0.1));
        if (n > 1) CHECK(j.at("sent_ratio").at(mode).get<double>() == Approx(1.0).margin(0.01));
      }
    }
  }
}
