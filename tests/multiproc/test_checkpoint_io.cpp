// Checkpoints within bounded memory (frugal_dist_worker checkpoint_io, Gloo on loopback): a
// zero3 job at 4 ranks saves; resuming at 2 and 3 ranks (another cut) and at 4 (the same). A
// ddp job's whole checkpoint resumed under zero3 at 2 and 3 ranks.
// Every rank checks itself (the worker): host memory above the live state within one unit's
// full state while saving and resuming, and under another cut exactly the blocks of the shard
// files that hold its slices read. Here: the figures say what they should of the whole job.
#include <catch2/catch.hpp>

#include "multiproc.h"

using namespace frugal::test;

namespace {

std::string worker() { return quote(dist_worker()) + " checkpoint_io "; }

// Resumes dir's checkpoint at n ranks under zero3, another layout than the one that wrote it;
// checks every rank's figures: memory within one unit's full state, about 1/n of the files
// read. Of shards exactly the blocks that hold the rank's slices; of a whole checkpoint's
// files at least those blocks and at most each as often as ranges it holds are read.
void check_resumed_elsewhere(const TempDir& dir, int n, bool whole) {
  CommandResult loaded = launch(n, worker() + "load " + quote(dir.path().string()), 180);
  INFO(loaded.out << loaded.err);
  REQUIRE(loaded.exit_code == 0);
  const auto load = rank0_report(loaded.out);
  REQUIRE(load["ranks"].size() == static_cast<size_t>(n));
  int64_t read = 0;
  for (const auto& r : load["ranks"]) {
    CHECK(r["whole"].get<bool>() == whole);
    CHECK_FALSE(r["same_layout"].get<bool>());
    if (whole) {
      CHECK(r["bytes_read"].get<int64_t>() >= r["bytes_needed"].get<int64_t>());
      CHECK(r["bytes_read"].get<int64_t>() <= r["bytes_needed_most"].get<int64_t>());
      // Reading model.pt and optimizer.pt whole (the old reader) would not fit the bound.
      CHECK(r["bytes_total"].get<int64_t>() > r["unit_state_bytes"].get<int64_t>());
    } else {
      CHECK(r["bytes_read"] == r["bytes_needed"]);
    }
    CHECK(r["load_extra_bytes"].get<int64_t>() <= r["unit_state_bytes"].get<int64_t>());
    read += r["bytes_read"].get<int64_t>();
    // About 1/n of the files each, never all of them (the old reader read them all).
    CHECK(r["bytes_read"].get<double>() < r["bytes_total"].get<double>() * (1.0 / n + 0.1));
  }
  // Together the ranks read the files about once (blocks at the cuts are read twice).
  CHECK(read < load["ranks"][0]["bytes_total"].get<double>() * 1.1);
}

}  // namespace

TEST_CASE("zero3 checkpoints save and resume within one unit's memory and read only kept ranges",
          "[multiproc][dist][zero][checkpoint]") {
  TempDir dir;
  CommandResult saved = launch(4, worker() + "save " + quote(dir.path().string()), 180);
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
    check_resumed_elsewhere(dir, n, /*whole=*/false);
  }
  {
    INFO("4 -> 4 ranks: each its own shard, entry by entry");
    CommandResult loaded = launch(4, worker() + "load " + quote(dir.path().string()), 180);
    INFO(loaded.out << loaded.err);
    REQUIRE(loaded.exit_code == 0);
    for (const auto& r : rank0_report(loaded.out)["ranks"]) {
      CHECK(r["same_layout"].get<bool>());
      CHECK(r["bytes_read"].get<int64_t>() <= r["own_shard_bytes"].get<int64_t>());
      CHECK(r["load_extra_bytes"].get<int64_t>() <= r["unit_state_bytes"].get<int64_t>());
    }
  }
}

TEST_CASE("a whole (ddp) checkpoint resumes under zero3 within one unit's memory, each rank "
          "reading only its slices",
          "[multiproc][dist][zero][checkpoint]") {
  TempDir dir;
  CommandResult saved = launch(2, worker() + "save_whole " + quote(dir.path().string()), 180);
  INFO(saved.out << saved.err);
  REQUIRE(saved.exit_code == 0);
  for (int n : {2, 3}) {
    INFO("ddp -> zero3 at " << n << " ranks");
    check_resumed_elsewhere(dir, n, /*whole=*/true);
  }
}
