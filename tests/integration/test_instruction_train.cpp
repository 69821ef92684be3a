// Training on instruction data (data.type tokenized): the loss counts only labelled tokens, so
// accumulation and packing do not change a step; a run resumes exactly mid-epoch.
#include <catch2/catch.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/instruction_samples.h"

using namespace frugal;

TEST_CASE("instruction data trains the same under accumulation and packing and resumes exactly",
          "[integration][data][instruction]") {
  test::TempDir dir("frugal-sft");
  test::write_tokenized_samples(dir / "d.jsonl");
  const std::string common = test::tiny_llama_tokenized_args(dir / "runs", dir / "d.jsonl");
  auto train = [&](const std::string& name, const std::string& extra) {
    auto r = test::frugal(common + " --set run.name=" + name + " " + extra);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return test::step_rows(dir / "runs" / name / "metrics.jsonl");
  };
  // Accumulation: micro-batches padded to their own longest sample give the step of one batch.
  const auto whole = train("b4", "--set train.max_steps=4 --set data.micro_batch_size=4");
  const auto split = train("b2x2",
                           "--set train.max_steps=4 --set data.micro_batch_size=2 "
                           "--set strategy.accumulation=2");
  REQUIRE(whole.size() == 4);
  REQUIRE(split.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(split[i]["loss"].get<double>() == Approx(whole[i]["loss"].get<double>()).epsilon(1e-6));
    CHECK(split[i]["grad_norm"].get<double>() ==
          Approx(whole[i]["grad_norm"].get<double>()).epsilon(1e-6));
  }
  // Packing: every sample in one step (all 28 rows), packed into rows with position ids per sample,
  // gives the loss and gradient of the same samples one a row (attention stays within samples).
  const auto unpacked = train("all", "--set train.max_steps=1 --set data.micro_batch_size=64");
  auto packed_run = test::frugal(common +
                                 " --set run.name=packed --set train.max_steps=1"
                                 " --set data.packing=true --set data.micro_batch_size=28");
  INFO(packed_run.out << packed_run.err);
  REQUIRE(packed_run.exit_code == 0);
  CHECK_THAT(packed_run.out + packed_run.err, Catch::Contains("64 samples, 28 rows, packed"));
  const auto packed = test::step_rows(dir / "runs" / "packed" / "metrics.jsonl");
  REQUIRE(packed.size() == 1);
  CHECK(packed[0]["loss"].get<double>() == Approx(unpacked[0]["loss"].get<double>()).epsilon(1e-5));
  CHECK(packed[0]["grad_norm"].get<double>() ==
        Approx(unpacked[0]["grad_norm"].get<double>()).epsilon(1e-5));
  // Token-capped batches (data.max_tokens_per_batch): every batch of the epoch in one step,
  // as accumulated micro-batches each cut to its own longest row, gives the step of all the
  // samples at once.
  const std::string cap = " --set data.max_tokens_per_batch=96 --set data.micro_batch_size=64";
  auto probe = test::frugal(common + " --set run.name=cap_probe --set train.max_steps=1" + cap);
  INFO(probe.out << probe.err);
  REQUIRE(probe.exit_code == 0);
  const std::string log = probe.out + probe.err;
  const size_t at = log.find(" batches of at most 96 tokens");
  REQUIRE(at != std::string::npos);
  const int groups = std::stoi(log.substr(log.rfind(", ", at) + 2));
  std::cout << "64 samples in " << groups << " batches of at most 96 tokens\n";
  CHECK(groups >= 64 * 4 / 96);  // > 4 positions a sample on average
  const auto capped = train(
      "cap", "--set train.max_steps=1 --set strategy.accumulation=" + std::to_string(groups) + cap);
  REQUIRE(capped.size() == 1);
  CHECK(capped[0]["loss"].get<double>() == Approx(unpacked[0]["loss"].get<double>()).epsilon(1e-5));
  CHECK(capped[0]["grad_norm"].get<double>() ==
        Approx(unpacked[0]["grad_norm"].get<double>()).epsilon(1e-5));
  // ... and resume exactly mid-epoch, as below.
  const std::string capped2 = cap + " --set strategy.accumulation=2 --set train.checkpoint_every=3";
  const auto capped_straight = train("cs", "--set train.max_steps=6" + capped2);
  train("cr", "--set train.max_steps=3" + capped2);
  const auto capped_resumed =
      train("cr", "--set train.max_steps=6 --set run.resume=auto" + capped2);
  REQUIRE(capped_resumed.size() == 6);
  CHECK(capped_resumed[5]["loss"].get<double>() == capped_straight[5]["loss"].get<double>());

  // Resume mid-epoch (shuffled, 16 steps of 4 samples an epoch): 3 + 3 steps equal 6.
  const auto straight = train("s", "--set train.max_steps=6 --set data.micro_batch_size=4");
  train("r",
        "--set train.max_steps=3 --set data.micro_batch_size=4 --set train.checkpoint_every=3");
  const auto resumed = train("r",
                             "--set train.max_steps=6 --set data.micro_batch_size=4 "
                             "--set train.checkpoint_every=3 --set run.resume=auto");
  REQUIRE(resumed.size() == 6);
  CHECK(resumed[5]["loss"].get<double>() == straight[5]["loss"].get<double>());
  CHECK(resumed[5]["grad_norm"].get<double>() == straight[5]["grad_norm"].get<double>());
}
