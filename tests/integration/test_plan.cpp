// frugal plan's predictions against measured peaks on the CPU (tracking allocator), for the gpt
// configs: every single-process combination of precision x checkpointing x offload x optimizer
// x micro-batch, predicted from the parameter count and one measured micro-step per precision
// x checkpointing, within 15% of the peak of two real training steps.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frugal/config/load.h"
#include "frugal/memory/batch_finder.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/planner.h"
#include "support/cli.h"

using namespace frugal;

TEST_CASE("frugal plan predicts each combination's peak within 15% of the measured one",
          "[integration][memory][plan]") {
  memory::install_cpu_tracking();
  for (const std::string config : {"configs/tiny-gpt.yaml", "configs/default.yaml"}) {
    SECTION(config) {
      Config cfg = load_config((test::source_dir() / config).string(), {"run.device=cpu"});
      if (cfg.data.type != "synthetic") {
        // The default trains on the fortunes corpus; the same model on synthetic tokens
        // has the same memory.
        cfg.data.type = "synthetic";
        cfg.data.synthetic_samples = 512;
      }
      cfg.data.num_workers = 0;
      const memory::ModelProfile profile = memory::profile_model(cfg);
      REQUIRE(profile.params > 0);
      memory::PlanOptions o;
      o.gpus = 1;
      double worst = 0;
      for (const auto& row : memory::plan(cfg, profile, o)) {
        // Keep the test short: the default's model is 30x the tiny one, so it is checked at
        // its own micro-batch and below.
        const int64_t largest = (config == "configs/default.yaml" ? 1 : 2) * cfg.data.micro_batch_size;
        if (row.micro_batch > largest) continue;
        Config c = cfg;
        c.strategy.precision = row.precision;
        c.strategy.checkpointing.policy = row.checkpointing;
        c.strategy.offload.optimizer = row.offload;
        c.optim.type = row.optimizer;
        c.optim.momentum = 0.9;
        const memory::BatchTrial t = memory::try_micro_batch(c, row.micro_batch, 2);
        REQUIRE(t.fits);
        const double err = std::abs(static_cast<double>(row.peak_bytes - t.peak_bytes)) / t.peak_bytes;
        INFO(row.precision << " " << row.checkpointing << " offload " << row.offload << " "
                           << row.optimizer << " b" << row.micro_batch << ": predicted "
                           << row.peak_bytes << ", measured " << t.peak_bytes);
        CHECK(err <= 0.15);
        worst = std::max(worst, err);
      }
      WARN(config << ": worst prediction error " << worst);
    }
  }
}

TEST_CASE("frugal plan's sharded predictions match 2-rank runs within 15%",
          "[integration][memory][plan][multiproc]") {
  memory::install_cpu_tracking();
  const std::string config = (test::source_dir() / "configs/tiny-gpt.yaml").string();
  Config cfg = load_config(config, {"run.device=cpu"});
  const memory::ModelProfile profile = memory::profile_model(cfg);
  test::TempDir dir;
  for (const std::string mode : {"ddp", "zero1", "zero2", "zero3"}) {
    test::CommandResult r = test::frugal(
        "launch --nproc-per-node 2 --master-port 0 -- train " + test::quote(config) +
            " --set run.dir=" + test::quote(dir.path().string()) + " --set run.name=" + mode +
            " --set strategy.sharding=" + mode +
            " --set train.max_steps=4 --set train.log_every=1 --set train.eval_batches=0"
            " --set generate.tokens=0 --set run.device=cpu",
        120);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // The most any rank reached in any step, from rank 0's metrics.
    int64_t measured = 0;
    std::istringstream lines(test::read_text(dir / mode / "metrics.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("rank_mem_allocated_peak_bytes")) continue;
      for (const auto& v : j.at("rank_mem_allocated_peak_bytes")) measured = std::max(measured, v.get<int64_t>());
    }
    memory::PlanRow row;
    row.sharding = mode;
    row.micro_batch = cfg.data.micro_batch_size;
    const int64_t predicted = memory::predict_peak(profile, row, 2);
    INFO(mode << ": predicted " << predicted << ", measured " << measured);
    CHECK(std::abs(static_cast<double>(predicted - measured)) / measured <= 0.15);
  }
}
