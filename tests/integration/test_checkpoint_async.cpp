// train.checkpoint_async: checkpoints written by a background thread while training goes on
// are the synchronous ones, byte for byte (model, optimizer state, random generators, data
// position, meta), in a single process and at world 2 under zero2 (sharded, published once
// both ranks wrote), also with the optimizer state on disk (written from the offload file in
// place); a run resumed from one ends where the uninterrupted run ends; keep_last still prunes. Killed during a background write: tests/integration/test_crash_resume.cpp.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

#include "frugal/io/checkpoint.h"
#include "support/checkpoint_files.h"
#include "support/cli.h"
#include "support/helpers.h"
#include "support/model_configs.h"

namespace fs = std::filesystem;

namespace test_checkpoint_async {

std::string run_args(const fs::path& dir, int steps) {
  return " train --set run.dir=" + frugal::test::quote(dir.string()) + " " +
         frugal::test::transformer_sets("gpt", 2, 2, 32, 16, 64) +
         " --set model.dropout=0.1 --set data.type=synthetic --set data.synthetic_samples=256"
         " --set data.micro_batch_size=4 --set data.num_workers=0 --set optim.type=adamw"
         " --set train.checkpoint_every=2 --set train.keep_last=2 --set train.eval_batches=0"
         " --set train.progress=none --set generate.tokens=0 --set train.max_steps=" +
         std::to_string(steps);
}

fs::path at_step(const fs::path& run, int step) {
  return run / "checkpoints" / fmt::format("step_{:08d}", step);
}

TEST_CASE("asynchronous checkpoints are the synchronous ones, byte for byte",
          "[integration][checkpoint][async]") {
  frugal::test::TempDir dir("frugal-async");
  frugal::test::TempDir scratch("frugal-async-nvme");
  struct Variant {
    const char* name;
    std::string prefix, sets;
  };
  const std::string launch = "launch --nproc-per-node 2 --master-port 0 --";
  const std::string on_disk = " --set strategy.offload.optimizer=nvme --set strategy.offload.buffer_mb=0.05"
                              " --set strategy.offload.nvme_path=" + frugal::test::quote(scratch.path().string());
  for (const Variant& v : {Variant{"single process", "", ""},
                           Variant{"world 2, zero2", launch, " --set strategy.sharding=zero2"},
                           Variant{"optimizer state on disk", "", on_disk},
                           Variant{"world 2, zero2, optimizer state on disk", launch,
                                   " --set strategy.sharding=zero2" + on_disk}}) {
    SECTION(v.name) {
      const std::string base = v.prefix + run_args(dir.path(), 9) + v.sets;
      const bool nvme = !v.sets.empty() && v.sets.find("nvme") != std::string::npos;
      auto sync = frugal::test::frugal(base + " --set run.name=sync", 300);
      INFO(sync.out << sync.err);
      REQUIRE(sync.exit_code == 0);
      auto async = frugal::test::frugal(base + " --set run.name=async --set train.checkpoint_async=true", 300);
      INFO(async.out << async.err);
      REQUIRE(async.exit_code == 0);
      // The state on disk is written from the offload file, not copied to host memory (the
      // step after the save waits for the write instead).
      CHECK_THAT(async.out + async.err,
                 Catch::Contains(nvme ? "of optimizer state read in place from the offload file"
                                      : "(written in the background)"));
      // keep_last 2: steps 8 and 9 (the final save) remain, as in the synchronous run.
      CHECK(frugal::list_checkpoints(dir / "async" / "checkpoints").size() == 2);
      for (int step : {8, 9}) frugal::test::check_identical(at_step(dir / "sync", step), at_step(dir / "async", step));
      // Resumed from the asynchronous step-8 checkpoint: the uninterrupted run's end.
      auto resumed = frugal::test::frugal(base + " --set run.name=resumed --set train.checkpoint_async=true"
                                          " --set run.resume=" + frugal::test::quote(at_step(dir / "async", 8).string()), 300);
      INFO(resumed.out << resumed.err);
      REQUIRE(resumed.exit_code == 0);
      frugal::test::check_identical(at_step(dir / "sync", 9), at_step(dir / "resumed", 9));
      fs::remove_all(dir / "sync");
      fs::remove_all(dir / "async");
      fs::remove_all(dir / "resumed");
    }
  }
}

}  // namespace test_checkpoint_async
