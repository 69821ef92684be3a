// Instruction data at world 2 through `frugal launch` (data.type tokenized, Gloo): under ddp
// and zero3 each rank reads its own samples (or its own token-capped batches), and every
// step's loss, the mean over the global batch's labelled tokens, and its gradient norm equal
// one process's with the same global batch. The same for a LoRA Llama, whose frozen base
// zero3 shards (half of it a rank at world 2) and which resumes at world 2 exactly.
#include <catch2/catch.hpp>

#include "multiproc.h"
#include "support/instruction_samples.h"

using namespace frugal::test;
namespace fs = std::filesystem;

namespace test_instruction_ranks {

// Three steps' losses and gradient norms, `b`'s equal to `a`'s within 1e-5.
void same(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(b[i]["loss"].get<double>() == Approx(a[i]["loss"].get<double>()).epsilon(1e-5));
    CHECK(b[i]["grad_norm"].get<double>() == Approx(a[i]["grad_norm"].get<double>()).epsilon(1e-5));
  }
}

}  // namespace test_instruction_ranks

using test_instruction_ranks::same;

TEST_CASE("instruction data under ddp and zero3 at world 2 equals one process",
          "[multiproc][dist][instruction]") {
  TempDir dir("frugal-sft-ranks");
  write_tokenized_samples(dir / "d.jsonl");
  const std::string common =
      tiny_llama_tokenized_args(dir / "runs", dir / "d.jsonl") + " --set train.max_steps=3";
  auto rows_of = [&](const std::string& name) {
    return step_rows(dir / "runs" / name / "metrics.jsonl");
  };
  auto one = [&](const std::string& name, const std::string& extra) {
    CommandResult r = frugal::test::frugal(common + " --set run.name=" + name + " " + extra, 180);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return rows_of(name);
  };
  auto two = [&](const std::string& name, const std::string& extra) {
    CommandResult r = launch(
        2, quote(frugal_binary()) + " " + common + " --set run.name=" + name + " " + extra, 180);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return rows_of(name);
  };
  // Samples: 4 a step in one process, 2 a rank at world 2 (padded to each rank's longest).
  const auto single = one("one", "--set data.micro_batch_size=4");
  for (const std::string mode : {"ddp", "zero3"}) {
    INFO(mode);
    same(single, two(mode, "--set data.micro_batch_size=2 --set strategy.sharding=" + mode));
  }
  // Token-capped batches: two a step, as accumulation in one process, one a rank at world 2.
  const std::string cap = "--set data.max_tokens_per_batch=96 --set data.micro_batch_size=64 ";
  const auto capped = one("cap", cap + "--set strategy.accumulation=2");
  for (const std::string mode : {"ddp", "zero3"}) {
    INFO(mode);
    same(capped, two("cap-" + mode, cap + "--set strategy.sharding=" + mode));
  }
}

TEST_CASE("lora under ddp and zero3 at world 2 equals one process and zero3 shards the frozen base",
          "[multiproc][dist][lora]") {
  TempDir dir("frugal-lora-ranks");
  write_tokenized_samples(dir / "d.jsonl");
  // Wide enough that the frozen base's per-rank MiB, logged with two decimals, is exact to 1%.
  const std::string common = tiny_llama_tokenized_args(dir / "runs", dir / "d.jsonl") +
                             " --set model.n_embd=128 --set model.n_head=4"
                             " --set 'model.lora={rank: 4, alpha: 8, targets: all-linear}'"
                             " --set optim.lr=0.01 --set train.max_steps=3";
  auto rows_of = [&](const std::string& name) {
    return step_rows(dir / "runs" / name / "metrics.jsonl");
  };
  // The frozen parameters a rank holds between steps, as zero3 logs them.
  auto frozen_mib = [](const CommandResult& r) {
    const std::string text = r.out + r.err;
    const std::string tail = " MiB of frozen parameters";
    const size_t end = text.find(tail);
    REQUIRE(end != std::string::npos);
    const size_t start = text.rfind(' ', end - 1) + 1;
    return std::stod(text.substr(start, end - start));
  };
  auto one = [&](const std::string& name, const std::string& extra) {
    CommandResult r = frugal::test::frugal(common + " --set run.name=" + name + " " + extra, 180);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  auto two = [&](const std::string& name, const std::string& extra) {
    CommandResult r = launch(
        2, quote(frugal_binary()) + " " + common + " --set run.name=" + name + " " + extra, 180);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  (void)one("one", "--set data.micro_batch_size=4");
  const auto single = rows_of("one");
  const double whole =
      frozen_mib(one("one-zero3", "--set data.micro_batch_size=4 --set strategy.sharding=zero3"));
  same(single, rows_of("one-zero3"));
  (void)two("ddp", "--set data.micro_batch_size=2 --set strategy.sharding=ddp");
  same(single, rows_of("ddp"));
  const std::string zero3 =
      "--set data.micro_batch_size=2 --set strategy.sharding=zero3 "
      "--set train.checkpoint_every=2";
  const double half = frozen_mib(two("zero3", zero3));
  same(single, rows_of("zero3"));
  CHECK(whole > 1.0);
  CHECK(half == Approx(whole / 2).margin(0.011));
  // Stopped after 2 steps and resumed at world 2: the frozen base read again, the adapters'
  // shards restored, the third step as the run that went on.
  (void)two("parts", zero3 + " --set train.max_steps=2");
  (void)two("parts", zero3 + " --set run.resume=auto");
  const auto resumed = rows_of("parts");
  REQUIRE(resumed.size() >= 3);
  CHECK(resumed.back()["loss"].get<double>() == rows_of("zero3")[2]["loss"].get<double>());
}
