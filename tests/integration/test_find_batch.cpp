// find-batch on the CPU against memory.budget, where the right answer is known: the peak of
// every micro-batch size is measured first (without a budget), and the budget set between two
// sizes' peaks; binsearch must find the larger size that fits, power the largest power of two.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "frugal/config/load.h"
#include "frugal/memory/batch_finder.h"
#include "frugal/memory/cpu_tracking.h"
#include "support/cli.h"

using namespace frugal;

namespace {

const char* kConfig =
    "model: {type: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32, vocab_size: 64}\n"
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
  const auto bin = memory::find_batch(cfg, o);
  CHECK(bin.micro_batch == 9);
  CHECK_FALSE(bin.limited_by_data);
  for (const auto& t : bin.trials) {
    INFO("micro-batch " << t.micro_batch);
    CHECK(t.fits == (t.micro_batch <= 9));
    if (!t.fits) CHECK_THAT(t.error, Catch::Contains("CPU memory budget exceeded"));
  }
  o.mode = "power";
  CHECK(memory::find_batch(cfg, o).micro_batch == 8);
  CHECK(memory::cpu_budget() == 0);  // the finder leaves no budget behind

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
