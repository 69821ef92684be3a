// Checkpoints within bounded memory (frugal_dist_worker checkpoint_io, Gloo on loopback): a
// zero3 job at 4 ranks saves; resuming at 2 and 3 ranks (another cut) and at 4 (the same).
// Every rank checks itself (the worker): host memory above the live state within one unit's
// full state while saving and resuming, and under another cut exactly the blocks of the shard
// files that hold its slices read. Here: the figures say what they should of the whole job.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

TEST_CASE("zero3 checkpoints save and resume within one unit's memory and read only kept ranges",
          "[multiproc][dist][zero][checkpoint]") {
  TempDir dir;
  const std::string worker = quote(dist_worker()) + " checkpoint_io ";
  CommandResult saved = launch(4, worker + "save " + quote(dir.path().string()), 180);
  INFO(saved.out << saved.err);
  REQUIRE(saved.exit_code == 0);
  const auto save = rank0_report(saved.out);
  REQUIRE(save["ranks"].size() == 4);
  for (const auto& r : save["ranks"]) {
    // The bound means something: a second copy of the rank's state would not fit in it.
    CHECK(r["rank_state_bytes"].get<int64_t>() > r["unit_state_bytes"].get<int64_t>());
    CHECK(r["save_extra_bytes"].get<int64_t>() <= r["unit_state_bytes"].get<int64_t>());
  }

  for (int n : {2, 3}) {
    INFO("4 -> " << n << " ranks");
    CommandResult loaded = launch(n, worker + "load " + quote(dir.path().string()), 180);
    INFO(loaded.out << loaded.err);
    REQUIRE(loaded.exit_code == 0);
    const auto load = rank0_report(loaded.out);
    REQUIRE(load["ranks"].size() == static_cast<size_t>(n));
    int64_t read = 0;
    for (const auto& r : load["ranks"]) {
      CHECK_FALSE(r["same_layout"].get<bool>());
      CHECK(r["shard_bytes_read"] == r["shard_bytes_needed"]);
      CHECK(r["load_extra_bytes"].get<int64_t>() <= r["unit_state_bytes"].get<int64_t>());
      read += r["shard_bytes_read"].get<int64_t>();
      // About 1/n of the shards each, never all of them (the old reader read every shard).
      CHECK(r["shard_bytes_read"].get<double>() <
            r["shard_bytes_total"].get<double>() * (1.0 / n + 0.1));
    }
    // Together the ranks read the shards about once (blocks at the cuts are read twice).
    CHECK(read < load["ranks"][0]["shard_bytes_total"].get<double>() * 1.1);
  }
  {
    INFO("4 -> 4 ranks: each its own shard, entry by entry");
    CommandResult loaded = launch(4, worker + "load " + quote(dir.path().string()), 180);
    INFO(loaded.out << loaded.err);
    REQUIRE(loaded.exit_code == 0);
    for (const auto& r : rank0_report(loaded.out)["ranks"]) {
      CHECK(r["same_layout"].get<bool>());
      CHECK(r["shard_bytes_read"].get<int64_t>() <= r["own_shard_bytes"].get<int64_t>());
      CHECK(r["load_extra_bytes"].get<int64_t>() <= r["unit_state_bytes"].get<int64_t>());
    }
  }
}
