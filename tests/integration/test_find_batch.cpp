// find-batch on the CPU against memory.budget, where the right answer is known: the peak of
// every micro-batch size is measured first (without a budget), and the budget set between two
// sizes' peaks; binsearch must find the larger size that fits, power the largest power of two.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "frugal/config/load.h"
#include "frugal/memory/batch_finder.h"
#include "frugal/memory/cpu_tracking.h"
#include "support/cli.h"
#include "support/model_configs.h"

using namespace frugal;

namespace {

const std::string kConfig =
    "model: " + test::transformer_yaml("gpt", 2, 2, 32, 32, 64) + "\n"
    "data: {type: synthetic, micro_batch_size: 4, synthetic_samples: 256, num_workers: 0}\n"
    "strategy: {accumulation: 2}\n"
    "run: {device: cpu}\n";

}  // namespace

TEST_CASE("find-batch finds the largest micro-batch under memory.budget", "[integration][memory]") {
  Config cfg = load_config_string(kConfig, "fb.yaml");
  memory::install_cpu_tracking();
  std::vector<int64_t> peak(13, 0);
  for (int64_t b = 1; b <= 12; ++b) {
    const memory::BatchTrial t = memory::try_micro_batch(cfg, b, 2);
    REQUIRE(t.fits);
    peak[b] = t.peak_bytes;
    if (b > 1) CHECK(peak[b] > peak[b - 1]);  // more samples, more activations
  }
  cfg.memory.budget = (peak[9] + peak[10]) / 2;
  memory::FindBatchOptions o;
  o.mode = "binsearch";
  o.margin = 0;  // to the byte
  const auto bin = memory::find_batch(cfg, o);
  CHECK(bin.micro_batch == 9);
  CHECK(bin.limit_bytes == cfg.memory.budget);
  CHECK_FALSE(bin.limited_by_data);
  for (const auto& t : bin.trials) {
    INFO("micro-batch " << t.micro_batch);
    CHECK(t.fits == (t.micro_batch <= 9));
    CHECK(t.out_of_memory == !t.fits);
    // The refused trial reports the peak it reached before the refusal: less than it needed.
    if (!t.fits) CHECK_THAT(t.error, Catch::StartsWith("CPU memory budget exceeded: tried to allocate"));
    if (!t.fits) CHECK(t.peak_bytes < peak[std::min<int64_t>(t.micro_batch, 12)]);
  }
  o.mode = "power";
  CHECK(memory::find_batch(cfg, o).micro_batch == 8);
  CHECK(memory::cpu_budget() == 0);  // the finder leaves no budget behind

  // A margin: a size fits only if its peak leaves that much of the budget free. The budget
  // between 9's and 10's peaks, with a margin that 8's peak clears and 9's does not.
  const double margin = 1.0 - (static_cast<double>(peak[8]) + peak[9]) / 2 / cfg.memory.budget;
  REQUIRE(margin > 0);
  o.mode = "binsearch";
  o.margin = margin;
  const auto kept = memory::find_batch(cfg, o);
  CHECK(kept.micro_batch == 8);
  const auto nine = std::find_if(kept.trials.begin(), kept.trials.end(),
                                 [](const auto& t) { return t.micro_batch == 9; });
  REQUIRE(nine != kept.trials.end());
  CHECK_FALSE(nine->fits);
  CHECK_FALSE(nine->out_of_memory);
  CHECK_THAT(nine->error, Catch::Contains("% margin"));

  const Config out = memory::with_micro_batch(cfg, 3, /*keep_global_batch=*/true);
  CHECK(out.data.micro_batch_size == 3);
  CHECK(out.strategy.accumulation == 3);  // 4 x 2 = 8 samples -> ceil(8 / 3)
}

TEST_CASE("frugal find-batch prints its trials and writes the config back", "[integration][memory]") {
  test::TempDir dir;
  const auto cfg = dir / "fb.yaml";
  test::write_text(cfg, kConfig);
  const auto out = dir / "found.yaml";
  test::CommandResult none = test::frugal("find-batch " + test::quote(cfg.string()));
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.out + none.err, Catch::Contains("set memory.budget"));

  test::CommandResult r = test::frugal("find-batch " + test::quote(cfg.string()) +
                                       " --set memory.budget=3MiB --keep-global-batch -o " +
                                       test::quote(out.string()));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("| 1 | yes |") && Catch::Contains("largest micro-batch that fits: "));
  CHECK_THAT(r.out, Catch::Contains("memory to fit in: 3.0 MiB less a 5% margin"));
  // The result once, on stdout; progress on stderr.
  CHECK(r.out.find("micro-batch 1 ") == std::string::npos);
  CHECK_THAT(r.err, Catch::Contains("find-batch: trying micro-batch 1\n"));
  CHECK_THAT(r.out, Catch::Contains(" | no | ") && Catch::Contains("over the 5% margin (at most 2.8 MiB of 3.0 MiB)"));
  const Config found = load_config(out.string());
  const int64_t b = found.data.micro_batch_size;
  CHECK(b >= 1);
  CHECK(found.strategy.accumulation == (8 + b - 1) / b);
  CHECK_THAT(r.out, Catch::Contains("largest micro-batch that fits: " + std::to_string(b)));
  // The file is not replaced without --overwrite.
  test::CommandResult again = test::frugal("find-batch " + test::quote(cfg.string()) +
                                           " --set memory.budget=3MiB -o " + test::quote(out.string()));
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.out + again.err, Catch::Contains("already exists"));
}
