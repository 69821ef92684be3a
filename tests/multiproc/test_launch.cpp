// frugal launch's contract: torchrun's environment, rank-prefixed output, a failing rank
// stops the job with its exit code, signals are forwarded, restarts resume training.
#include <catch2/catch.hpp>

#include "multiproc.h"
#include "support/model_configs.h"

using namespace frugal::test;

TEST_CASE("launch gives each rank torchrun's environment and prefixes its lines",
          "[multiproc][launch]") {
  CommandResult r = launch(3, "/bin/sh -c " +
                                  quote("echo \"out $RANK/$WORLD_SIZE local $LOCAL_RANK/"
                                        "$LOCAL_WORLD_SIZE at $MASTER_ADDR\"; echo err $RANK >&2"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    CHECK_THAT(r.out, Catch::Contains("[rank " + n + "] out " + n + "/3 local " + n +
                                      "/3 at 127.0.0.1\n"));
    CHECK_THAT(r.err, Catch::Contains("[rank " + n + "] err " + n + "\n"));
  }
}

TEST_CASE("a failing rank stops the others and its exit code is the job's",
          "[multiproc][launch][bad_input]") {
  const auto start = std::chrono::steady_clock::now();
  CommandResult r = launch(
      3, "/bin/sh -c " + quote("if [ \"$RANK\" = 1 ]; then sleep 1; echo 'the disk is full' >&2; "
                   "echo >&2; exit 7; fi; exec sleep 60"),
      60, "--grace 2");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 7);
  CHECK_THAT(r.err, Catch::Contains("frugal launch: rank 1 exited with code 7; stopping the "
                                    "other ranks"));
  // Its last words (the last line on stderr with anything in it) close the account.
  CHECK_THAT(r.err, Catch::EndsWith("frugal launch: job failed: rank 1 exited with code 7; its "
                                    "last words: the disk is full\n"));
  CHECK(seconds < 20);
}

TEST_CASE("SIGTERM to the launcher reaches every rank", "[multiproc][launch]") {
  TempDir dir;
  const auto out = dir / "out", err = dir / "err";
  // The launcher in the background; once both ranks are up, SIGTERM it.
  CommandResult r = run_command(
      quote(frugal_binary()) + " launch --nproc-per-node 2 --master-port 0 --grace 5 -- /bin/sh -c " +
          quote("trap 'echo got TERM; exit 0' TERM; echo up; sleep 30 & wait") + " >" +
          quote(out.string()) + " 2>" + quote(err.string()) + " & L=$!; " +
          "for i in $(seq 100); do [ \"$(grep -c up " + quote(out.string()) +
          " 2>/dev/null)\" = 2 ] && break; sleep 0.1; done; kill -TERM $L; wait $L; "
          "echo exit=$?",
      60);
  const std::string o = read_text(out), e = read_text(err);
  INFO(r.out << r.err << o << e);
  CHECK_THAT(r.out, Catch::Contains("exit=143"));
  CHECK_THAT(e, Catch::Contains("frugal launch: received signal 15; forwarding it to every rank"));
  CHECK_THAT(o, Catch::Contains("[rank 0] got TERM"));
  CHECK_THAT(o, Catch::Contains("[rank 1] got TERM"));
}

TEST_CASE("launch with --max-restarts restarts a killed job, which resumes from its newest checkpoint",
          "[multiproc][launch][resume]") {
  TempDir dir;
  const auto cfg = dir / "job.yaml";
  write_text(cfg, "run: {name: restartjob, dir: '" + dir.path().string() + "', seed: 3}\n"
                  "model: " + transformer_yaml("gpt", 1, 2, 16, 8, 32) + "\n"
                  "data: {type: synthetic, micro_batch_size: 2, synthetic_samples: 64, "
                  "num_workers: 0}\n"
                  "train: {max_steps: 400, log_every: 50, eval_batches: 0, progress: lines, "
                  "checkpoint_every: 10}\n"
                  "strategy: {sharding: ddp}\n"
                  "generate: {tokens: 0}\n");
  const auto first = dir / "restartjob" / "checkpoints" / "step_00000010";
  // Kill one rank with SIGKILL once the first checkpoint exists.
  CommandResult r = run_command(
      quote(frugal_binary()) + " launch --nproc-per-node 2 --master-port 0 --max-restarts 1 " +
          "--grace 2 -- train " + quote(cfg.string()) + " >" + quote((dir / "out").string()) +
          " 2>" + quote((dir / "err").string()) + " & L=$!; " + "for i in $(seq 600); do [ -d " +
          quote(first.string()) + " ] && break; sleep 0.05; done; " +
          "pkill -KILL -f -n '^frugal train .*job.yaml'; wait $L; echo exit=$?",
      120);
  const std::string o = read_text(dir / "out"), e = read_text(dir / "err");
  INFO(r.out << o << e);
  CHECK_THAT(r.out, Catch::Contains("exit=0"));
  CHECK_THAT(e, Catch::Contains("exited with code 137; stopping the other ranks"));
  CHECK_THAT(e, Catch::Contains("frugal launch: restarting all 2 ranks (restart 1 of 1)"));
  CHECK_THAT(o, Catch::Contains("[rank 0] steps: 400 (resumed at "));
}

TEST_CASE("too little data for a job speaks of the global batch, per rank and ranks",
          "[multiproc][launch][bad_input]") {
  TempDir dir;
  const auto cfg = dir / "few.yaml";
  write_text(cfg, tiny_gpt_yaml(dir.path().string(), "few", 2));
  // Six samples, four per rank and step: one global batch of eight does not fit.
  CommandResult r = launch(2, quote(frugal_binary()) + " train " + quote(cfg.string()) +
                                  " --set data.synthetic_samples=6 --set strategy.sharding=ddp",
                           120);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::EndsWith(
                        "its last words: frugal: error: data: the training split has 6 samples, "
                        "fewer than one global batch of 8 = 4 per rank x 2 ranks "
                        "(data.micro_batch_size 4 x strategy.accumulation 1 per rank)\n"));
}
