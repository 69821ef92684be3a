// train.tensorboard through `frugal train`: TensorBoard (the PyPI package, reading the event
// files back) shows every number metrics.jsonl holds, under the same tag at the same step, as
// float32; the resolved config as text; per-module histograms and norms when asked. A resumed
// run appends to the same folder and every step is there once per tag, in the raw records too.
// Under `frugal launch` with tensorboard_ranks all, each rank writes its own folder, equal to
// its metrics.rank<N>.jsonl.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "multiproc/multiproc.h"
#include "support/cli.h"
#include "support/tensorboard.h"

using namespace frugal;
using nlohmann::json;

namespace {

std::vector<json> jsonl_records(const std::filesystem::path& file) {
  std::vector<json> out;
  std::istringstream lines(test::read_text(file));
  for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
  return out;
}

// Every number of every record (one tag per rank for lists) equals TensorBoard's scalar at the
// record's step, as float32; returns how many values were compared.
int check_scalars_match(const std::vector<json>& records, const json& tb) {
  int compared = 0;
  auto check = [&](const std::string& tag, int64_t step, double value) {
    INFO("tag " << tag << " step " << step);
    REQUIRE(tb["scalars"].contains(tag));
    int found = 0;
    for (const auto& sv : tb["scalars"][tag]) {
      if (sv[0].get<int64_t>() != step) continue;
      ++found;
      CHECK(sv[1].get<double>() == static_cast<double>(static_cast<float>(value)));
    }
    CHECK(found == 1);
    ++compared;
  };
  for (const auto& r : records) {
    const int64_t step = r.at("step").get<int64_t>();
    for (const auto& [key, v] : r.items()) {
      if (key == "step") continue;
      if (v.is_boolean()) {
        check(key, step, v.get<bool>() ? 1.0 : 0.0);
      } else if (v.is_number()) {
        check(key, step, v.get<double>());
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) check(key + "/rank" + std::to_string(i), step, v[i].get<double>());
      }
    }
  }
  return compared;
}

// Each tag's steps in the raw records: every step once.
void check_steps_once(const json& tb) {
  for (const auto& [tag, steps] : tb["raw"]["steps"].items()) {
    INFO("tag " << tag << ": steps " << steps.dump());
    std::set<int64_t> seen;
    for (const auto& s : steps) CHECK(seen.insert(s.get<int64_t>()).second);
  }
}

// `train CONFIG --set ...`: the tiny GPT of support/cli.h, a record every step, an evaluation
// and a checkpoint every 2 steps, TensorBoard on.
std::string tb_train_args(const test::TempDir& runs, int max_steps) {
  const auto cfg = runs / "tb.yaml";
  test::write_text(cfg, test::tiny_gpt_yaml(runs.path().string(), "tb", max_steps));
  return "train " + test::quote(cfg.string()) +
         " --set train.eval_every=2 --set train.eval_batches=1 --set train.checkpoint_every=2"
         " --set train.keep_last=10 --set train.progress=none --set train.tensorboard=true"
         " --set generate.tokens=0";
}

}  // namespace

TEST_CASE("tensorboard: every metrics.jsonl number, the config and histograms, through a resume",
          "[integration][tensorboard][cli][python]") {
  test::TempDir runs("frugal-tb");
  const auto run_dir = runs / "tb";
  auto first =
      test::frugal(tb_train_args(runs, 5) + " --set train.tensorboard_histograms_every=2", 300);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  {
    const auto tb = test::read_tensorboard(run_dir / "tensorboard");
    INFO(tb.dump());
    const auto records = jsonl_records(run_dir / "metrics.jsonl");
    const int compared = check_scalars_match(records, tb);
    CHECK(compared > 5 * 12);
    // The config as text, once, at the first step: the resolved YAML in a fenced block.
    REQUIRE(tb["texts"]["config"].size() == 1);
    CHECK(tb["texts"]["config"][0][0] == 1);
    const std::string text = tb["texts"]["config"][0][1];
    CHECK_THAT(text, Catch::StartsWith("```yaml\n"));
    CHECK_THAT(text, Catch::Contains(test::read_text(run_dir / "config.resolved.yaml")));
    // Histograms at steps 2 and 4, for the first block's attention projection among others,
    // with the parameters' and gradients' norms (single process: gradients readable).
    const json& h = tb["histograms"]["params/blocks.0.attn.qkv"];
    REQUIRE(h.size() == 2);
    CHECK(h[0][0] == 2);
    CHECK(h[1][0] == 4);
    CHECK(h[0][1].get<double>() == h[0][5].get<double>());  // every value in a bucket
    CHECK(tb["scalars"]["grad_norm/blocks.0.attn.qkv"].size() == 2);
    CHECK(tb["scalars"]["param_norm/blocks.0.attn.qkv"][0][1].get<double>() > 0);
    CHECK(tb["raw"]["versions"].size() == 1);
  }

  // Resume from step 4 (step 5's checkpoint removed, as if it had never been written): the
  // events of step 5 are dropped and steps 5 and 6 written again, once.
  std::filesystem::remove_all(run_dir / "checkpoints" / "step_00000005");
  auto second = test::frugal(
      tb_train_args(runs, 6) + " --set train.tensorboard_histograms_every=2" +
          " --set run.resume=" +
          test::quote((run_dir / "checkpoints" / "step_00000004").string()),
      300);
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  const auto tb = test::read_tensorboard(run_dir / "tensorboard");
  INFO(tb.dump());
  check_steps_once(tb);
  CHECK(tb["raw"]["steps"]["loss"] == json::parse("[1, 2, 3, 4, 5, 6]"));
  CHECK(tb["raw"]["steps"]["val_loss"] == json::parse("[2, 4, 6]"));
  CHECK(tb["raw"]["steps"]["params/blocks.0.attn.qkv"] == json::parse("[2, 4, 6]"));
  // The config again at the resumed run's first step.
  CHECK(tb["raw"]["steps"]["config"] == json::parse("[1, 5]"));
  check_scalars_match(jsonl_records(run_dir / "metrics.jsonl"), tb);

  // TensorBoard's own server over the folder: its HTTP API serves the loss of every step as
  // metrics.jsonl has it, and its web page, drawn by headless Chromium, shows the chart.
  const auto shot = runs / "tensorboard.png";
  const test::CommandResult served = test::run_command(
      test::python() + " " +
          test::quote((test::source_dir() / "tests/python/tensorboard_server.py").string()) +
          " " + test::quote((run_dir / "tensorboard").string()) + " loss " +
          test::quote(shot.string()),
      240);
  INFO(served.out << served.err);
  REQUIRE(served.exit_code == 0);
  const json api = json::parse(served.out);
  REQUIRE(api["runs"] == json::parse(R"(["."])"));
  const json& loss = api["scalars"]["."];
  std::vector<json> records;  // the training steps' (evaluations have records of their own)
  for (const auto& r : jsonl_records(run_dir / "metrics.jsonl")) {
    if (r.contains("loss")) records.push_back(r);
  }
  REQUIRE(loss.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    CHECK(loss[i][0] == records[i]["step"]);
    CHECK(loss[i][1].get<double>() ==
          static_cast<double>(static_cast<float>(records[i]["loss"].get<double>())));
  }
  CHECK(api["screenshot"]["exit_code"] == 0);
  REQUIRE(std::filesystem::exists(shot));
  const test::CommandResult stats = test::run_command(
      test::python() + " " + test::quote((test::source_dir() / "tests/python/png_stats.py").string()) +
      " " + test::quote(shot.string()));
  INFO(stats.out << stats.err);
  REQUIRE(stats.exit_code == 0);
  const json png = json::parse(stats.out);
  CHECK(png["non_white"].get<double>() > 0.02);  // the page drew (not a blank window)
  CHECK(png["colors"].get<int>() > 50);
  // FRUGAL_DOC_IMAGES=docs/images keeps the screenshot for docs/observability.md.
  if (const char* keep = std::getenv("FRUGAL_DOC_IMAGES"); keep != nullptr && *keep != '\0') {
    std::filesystem::copy_file(shot, std::filesystem::path(keep) / "tensorboard-scalars.png",
                               std::filesystem::copy_options::overwrite_existing);
  }
}

TEST_CASE("tensorboard: tensorboard_ranks all writes one folder per rank under frugal launch",
          "[integration][tensorboard][multiproc][python]") {
  test::TempDir runs("frugal-tb-ranks");
  const auto run_dir = runs / "tb";
  auto r = test::launch(2, tb_train_args(runs, 3) +
                               " --set strategy.sharding=ddp --set train.metrics_per_rank=true"
                               " --set train.tensorboard_ranks=all",
                        180);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Rank 0: metrics.jsonl (with every rank's figures); rank 1: its own record.
  const auto tb0 = test::read_tensorboard(run_dir / "tensorboard" / "rank0");
  check_scalars_match(jsonl_records(run_dir / "metrics.jsonl"), tb0);
  CHECK(tb0["scalars"].contains("rank_step_time_s/rank1"));
  const auto tb1 = test::read_tensorboard(run_dir / "tensorboard" / "rank1");
  std::vector<json> rank1 = jsonl_records(run_dir / "metrics.rank1.jsonl");
  check_scalars_match(rank1, tb1);
  CHECK_FALSE(tb1["scalars"].contains("rank_step_time_s/rank1"));
  CHECK(tb1["texts"].contains("config"));
  // Rank 1's file names itself.
  bool named = false;
  for (const auto& e : std::filesystem::directory_iterator(run_dir / "tensorboard" / "rank1")) {
    named |= e.path().filename().string().ends_with(".rank1");
  }
  CHECK(named);
}
