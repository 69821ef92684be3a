// c10d through frugal::dist::Communicator at 2 and 4 ranks on Gloo: each collective's result,
// the traffic it counts, and a stuck rank turning into a clear failure instead of a hang.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

TEST_CASE("collectives give the right results and count their traffic", "[multiproc][dist]") {
  for (int n : {2, 4}) {
    SECTION("world " + std::to_string(n)) {
      CommandResult r = launch(n, quote(dist_worker()) + " collectives");
      INFO(r.out << r.err);
      REQUIRE(r.exit_code == 0);
      auto j = rank0_report(r.out);
      CHECK(j.at("world") == n);
      CHECK(j.at("backend") == "gloo");
      // all_reduce: 1000 + 3 floats; ring: each rank sends 2 (N-1)/N of the payload.
      const auto& ar = j.at("traffic").at("all_reduce");
      CHECK(ar.at("calls") == 2);
      CHECK(ar.at("payload_bytes") == 4000 + 12);
      CHECK(ar.at("sent_bytes") == int64_t(4000 * 2.0 * (n - 1) / n) + int64_t(12 * 2.0 * (n - 1) / n));
      const auto& ag = j.at("traffic").at("all_gather");
      CHECK(ag.at("payload_bytes") == 4 * 2 * n);
      const auto& rs = j.at("traffic").at("reduce_scatter");
      CHECK(rs.at("payload_bytes") == 4 * 2 * n);
    }
  }
}

TEST_CASE("a rank that never joins a collective fails the job after the timeout",
          "[multiproc][dist]") {
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = launch(2, quote(dist_worker()) + " stuck", 90, "--grace 2");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);  // the worker's frugal::Error exit code, passed on by the launcher
  CHECK_THAT(r.err, Catch::Contains("[rank 0] worker error: distributed: all_reduce on rank 0 of 2 "
                                    "failed or did not finish within 3 s"));
  CHECK_THAT(r.err, Catch::Contains("frugal launch: rank 0 exited with code 3; stopping the other "
                                    "ranks"));
  CHECK(seconds < 30);  // rank 1 sleeps 30 s: it was stopped, not waited for
}
