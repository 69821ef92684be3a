// The evaluation after the last step is a row of metrics.jsonl (marked final), and every
// validation row carries its perplexity beside the loss.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

#include "support/cli.h"

using namespace frugal;

namespace final_eval_test {

std::vector<nlohmann::json> eval_rows(const std::filesystem::path& metrics) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(test::read_text(metrics));
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) rows.push_back(j);
  }
  return rows;
}

}  // namespace final_eval_test

TEST_CASE("the final evaluation is a metrics row with its perplexity", "[integration][train]") {
  test::TempDir dir("frugal-final-eval");
  const std::string base =
      "train " + test::quote((test::source_dir() / "configs/tiny-gpt.yaml").string()) +
      " --set run.dir=" + test::quote(dir.path().string()) +
      " --set train.max_steps=3 --set train.eval_batches=2 --set train.progress=none"
      " --set generate.tokens=0 --set run.device=cpu";
  auto r = test::frugal(base + " --set run.name=end --set train.eval_every=0");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto rows = final_eval_test::eval_rows(dir / "end" / "metrics.jsonl");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("step") == 3);
  CHECK(rows[0].at("final") == true);
  const double loss = rows[0].at("val_loss").get<double>();
  CHECK(rows[0].at("val_perplexity").get<double>() == Approx(std::exp(loss)).epsilon(1e-12));
  CHECK_THAT(r.out + r.err, Catch::Contains("final val loss") && Catch::Contains("perplexity"));
  // Evaluated during training at its last step: that row is the last word, no second one.
  r = test::frugal(base + " --set run.name=every --set train.eval_every=3");
  REQUIRE(r.exit_code == 0);
  rows = final_eval_test::eval_rows(dir / "every" / "metrics.jsonl");
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].contains("final"));
  CHECK(rows[0].contains("val_perplexity"));
}
