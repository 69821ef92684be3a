// The collective flight recorder (include/frugal/distributed/flight_recorder.h): its records
// and verdict from two ranks' dumps, and at world 2 under `frugal launch` with zero3, one rank
// made to skip one collective (FRUGAL_FAULT_SKIP_COLLECTIVE): the job fails with the dumps in
// the run directory and a verdict; with distributed.debug it fails at that very collective,
// naming both ranks' sides.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <utility>
#include <nlohmann/json.hpp>

#include "frugal/distributed/flight_recorder.h"
#include "frugal/io/atomic_file.h"
#include "multiproc/multiproc.h"
#include "support/model_configs.h"

using namespace frugal;
namespace fs = std::filesystem;

TEST_CASE("flight recorder: records, and the verdict names the rank behind and where ranks part",
          "[distributed][unit]") {
  dist::FlightRecorder ring(4);
  for (int i = 0; i < 6; ++i) ring.finish(ring.begin("all_reduce", "Float", 8, "bucket 0"), true);
  CHECK(ring.next_seq() == 6);
  const auto kept = ring.records();
  REQUIRE(kept.size() == 4);  // the most recent ones
  CHECK(kept.front().seq == 2);
  CHECK(kept.back().state == "done");
  CHECK(dist::describe(kept.back()) == "#5 all_reduce Float x8 [bucket 0]");

  test::TempDir dir("frugal-flight");
  // Rank 0 finished #0 and waits in #1 (blocks.1); rank 1 skipped that one: its #1 is blocks.2.
  dist::FlightRecorder r0, r1;
  r0.finish(r0.begin("all_gather", "Float", 64, "blocks.0/decay"), true);
  r0.begin("all_gather", "Float", 64, "blocks.1/decay");
  r1.finish(r1.begin("all_gather", "Float", 64, "blocks.0/decay"), true);
  r1.finish(r1.begin("all_gather", "Float", 64, "blocks.2/decay"), true);
  r1.begin("reduce_scatter", "Float", 128, "blocks.2/decay");
  io::write_file_atomic(dir / "rank_0.json", r0.to_json(0, 2, "timeout"));
  io::write_file_atomic(dir / "rank_1.json", r1.to_json(1, 2, "timeout"));
  const std::string v = dist::flight_recorder_verdict(dir.path(), 2);
  INFO(v);
  CHECK_THAT(v, Catch::Contains("rank 0 is behind (1 collectives completed, the last #0 all_gather"));
  CHECK_THAT(v, Catch::Contains("the ranks part at #1: rank 0 #1 all_gather Float x64 "
                                "[blocks.1/decay] (pending), rank 1 #1 all_gather Float x64 "
                                "[blocks.2/decay] (done)"));
  // One dump missing: named.
  fs::remove(dir / "rank_1.json");
  CHECK_THAT(dist::flight_recorder_verdict(dir.path(), 2), Catch::Contains("rank 1 left no dump"));
  // After the ranks were given time to write theirs: dead or stuck (a failure would have
  // written one).
  CHECK_THAT(dist::flight_recorder_verdict(dir.path(), 2, 3.0),
             Catch::Contains("rank 1 left no dump within 3 s (it died, or is stuck)"));
  CHECK(dist::flight_recorder_verdict(dir / "none", 2).empty());
}

namespace {

std::string zero3_job(const fs::path& dir, const std::string& extra) {
  return "train --set run.dir=" + test::quote(dir.string()) + " --set run.name=job " +
         test::transformer_sets("gpt", 2, 2, 32, 16, 64) + " --set data.type=synthetic"
         " --set data.synthetic_samples=256 --set data.micro_batch_size=2"
         " --set data.num_workers=0 --set strategy.sharding.mode=zero3"
         " --set train.max_steps=8 --set train.eval_batches=0 --set train.progress=none"
         " --set generate.tokens=0 --set distributed.timeout_s=5 " +
         extra;
}

// The job at world 2 with rank 1 skipping its collective #100 (in the training steps: the
// first ones broadcast the model); the result and the seconds it took.
std::pair<test::CommandResult, double> skipping_job(const fs::path& dir, const std::string& extra) {
  const auto start = std::chrono::steady_clock::now();
  auto r = test::run_command("FRUGAL_FAULT_SKIP_COLLECTIVE=1:100 " +
                                 test::quote(test::frugal_binary()) +
                                 " launch --nproc-per-node 2 --master-port 0 --grace 5 -- " +
                                 zero3_job(dir, extra),
                             120);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace

TEST_CASE("a rank that skips a collective: the job fails with every rank's record and a verdict, "
          "and distributed.debug names both sides at once",
          "[multiproc][distributed][reliability]") {
  test::TempDir dir("frugal-flight-job");
  {
    const auto [r, s] = skipping_job(dir / "plain", "");
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("rank 1 skips its collective #100"));
    // Rank 1 pairs the wrong collectives and dies in Gloo's transport thread (std::terminate)
    // or times out; either way its dump is written, and rank 0's, stopped by the launcher's
    // SIGTERM or failing on its own, names where the two ranks' collectives part.
    CHECK_THAT(r.err, Catch::Contains("flight recorder: "));
    CHECK_THAT(r.err, Catch::Contains("the ranks part at #100: rank 0 #100 "));
    CHECK(s < 60);  // the 5 s timeout, the launcher's grace, start-up: never a hang
    const fs::path dumps = dir / "plain" / "job" / "flight_recorder";
    REQUIRE(fs::exists(dumps / "rank_0.json"));
    CHECK(fs::exists(dumps / "rank_1.json"));
    const auto j = nlohmann::json::parse(test::read_text(dumps / "rank_0.json"));
    CHECK(j["rank"] == 0);
    CHECK(j["next_seq"].get<int64_t>() >= 100);
    bool unfinished = false;
    for (const auto& rec : j["records"]) unfinished = unfinished || rec["state"] != "done";
    CHECK(unfinished);
  }
  {
    const auto [r, s] = skipping_job(dir / "debug", "--set distributed.debug=true");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    // Both ranks at their #100: rank 0's is the collective rank 1 skipped, rank 1's the next.
    CHECK_THAT(r.err, Catch::Contains("distributed.debug: the ranks are about to run different "
                                      "collectives (rank "));
    CHECK_THAT(r.err, Catch::Contains("rank 0: #100 "));
    CHECK_THAT(r.err, Catch::Contains("rank 1: #100 "));
    CHECK(s < 30);  // at once, not after the timeout
  }
  // No rank outlives its launcher.
  const auto left = test::kill_processes_mentioning(dir.path().string());
  for (const auto& p : left) UNSCOPED_INFO("left running: " << p.pid << " " << p.command_line);
  CHECK(left.empty());
}
