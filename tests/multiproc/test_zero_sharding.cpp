// zero1, zero2 and zero3 at 1, 2 and 4 ranks on Gloo. The worker (frugal_dist_worker zero)
// trains a small GPT under each mode, with and without accumulation (gradients kept sharded or
// whole meanwhile) and checkpointing, and checks on every rank:
// - the parameters after 4 steps equal one process's on the same global batch (fp32, 1e-5);
// - the state each rank keeps equals ZeRO's formula (16Ψ, what is sharded divided by N);
// - the bytes sent per step equal 2Ψ (zero1/2) or 3Ψ (zero3's blocks; 2Ψ for its root unit);
// - zero3's peak of gathered parameters is exactly the root unit and two blocks (the one
//   computing and the one prefetched);
// - wrap: size merges blocks into fewer units; bf16-mixed composes (no further from one bf16
//   process than twice what cutting its batch moves it, ~1e-2 after 4 Adam steps at lr 3e-3);
//   param_dtype bf16 gathers half the bytes and stays near the fp32 run (5e-2); fp16-mixed
//   under zero2 skips the same overflowing steps with the same scales as one process;
// - offload.optimizer (zero2, zero3; stepped after backward, or pipelined during it) and
//   offload.params (zero3) train bit for bit as without; at world 4 so does hsdp with either.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

TEST_CASE("zero1/2/3 at world 1, 2 and 4 equal one process, with ZeRO's memory and traffic",
          "[multiproc][dist][zero]") {
  for (int n : {1, 2, 4}) {
    SECTION("world " + std::to_string(n)) {
      CommandResult r = launch(n, quote(dist_worker()) + " zero", 240);
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      auto j = rank0_report(r.out);
      // World 4 adds hsdp (2 groups of 2) with the five variants.
      REQUIRE(j.at("max_diff").size() == (n == 4 ? 25 : 20));
      if (n == 4) {
        CHECK(j.at("offload_exact").at("hsdp/params") == true);
        for (const char* where : {"within", "across"}) {
          CHECK(j.at("hsdp_sent_ratio").at(where).get<double>() == Approx(1.0).margin(0.01));
        }
      }
      CHECK(j.at("fp16_skipped").get<int>() > 0);
      for (const auto& [variant, diff] : j.at("max_diff").items()) {
        INFO(variant);
        const bool reduced_precision =
            variant.find("bf16") != std::string::npos || variant.find("fp16") != std::string::npos;
        CHECK(diff.get<double>() < (reduced_precision ? 5e-2 : 1e-5));
      }
      CHECK(j.at("units").at("size") == 2);
      // zero1 with offload.optimizer ram and nvme; zero2 and zero3 with offload.optimizer ram
      // (with and without the pipelined step) and nvme; zero3 with offload.params, alone and
      // with the state on disk.
      // World 4: hsdp with offload.optimizer, and with offload.params.
      CHECK(j.at("offload_exact").size() == (n == 4 ? 12 : 10));
      for (const char* run : {"zero1/optimizer", "zero1/nvme", "zero2/nvme", "zero3/nvme",
                              "zero3/params+nvme"}) {
        CHECK(j.at("offload_exact").at(run) == true);
      }
      CHECK(j.at("units").at("block") == 4);
      CHECK(j.at("peak_gathered_bytes_bf16").get<int64_t>() * 2 ==
            j.at("peak_gathered_bytes").get<int64_t>());
      for (const char* mode : {"zero1", "zero2", "zero3"}) {
        CHECK(j.at("state_ratio").at(mode).get<double>() == Approx(1.0).margin(0.1));
        if (n > 1) CHECK(j.at("sent_ratio").at(mode).get<double>() == Approx(1.0).margin(0.01));
      }
    }
  }
}
