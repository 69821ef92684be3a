// `frugal doctor --distributed` under frugal launch at world 2: rank 0 reports the collectives'
// bus bandwidth between the ranks and, with a config, each sharding mode's bytes per step by
// the ring formulas (ddp = zero1 = zero2 = 2 (N-1)/N x the model's fp32 bytes, zero3 1.5x
// that) and their share of a step; the other rank reports nothing.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "multiproc/multiproc.h"

namespace test_doctor_distributed {

// The integer before `unit` in `text` ("(123 B)", "(456 trained parameters"), or -1.
int64_t number_before(const std::string& text, const std::string& unit) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\\((\\d+) " + unit))) return -1;
  return std::stoll(m[1]);
}

}  // namespace test_doctor_distributed

TEST_CASE("doctor --distributed measures the ranks' links and each mode's share of a step",
          "[multiproc][doctor]") {
  using test_doctor_distributed::number_before;
  const std::string config = (frugal::test::source_dir() / "configs/tiny-gpt.yaml").string();
  const frugal::test::CommandResult r = frugal::test::launch(
      2, "doctor --json --distributed --distributed-mib 4 " + frugal::test::quote(config), 180);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(frugal::test::rank0_text(r.out));
  REQUIRE(j.contains("findings"));
  std::map<std::string, std::string> value;
  for (const auto& f : j.at("findings")) value[f.at("name").get<std::string>()] = f.at("value").get<std::string>();
  CHECK_THAT(value["distributed job"], Catch::Contains("2 ranks on 1 node(s) (gloo)"));
  for (const char* op : {"all_reduce 1 MiB", "all_gather 1 MiB", "all_reduce 4 MiB", "all_gather 4 MiB"}) {
    INFO(op);
    REQUIRE(value.count(op) == 1);
    std::smatch m;
    const std::string& v = value[op];
    REQUIRE(std::regex_search(v, m, std::regex("([0-9.]+) GiB/s bus bandwidth")));
    CHECK(std::stod(m[1]) > 0.0);
  }
  const int64_t params = number_before(value["compute per step"], "trained parameters");
  REQUIRE(params > 0);
  // World 2: (N-1)/N = 1/2 of 4 bytes per parameter, twice for ddp and zero1/2, thrice zero3.
  CHECK(number_before(value["communication ddp"], "B") == 4 * params);
  CHECK(number_before(value["communication zero1"], "B") == 4 * params);
  CHECK(number_before(value["communication zero2"], "B") == 4 * params);
  CHECK(number_before(value["communication zero3"], "B") == 6 * params);
  CHECK_THAT(value["communication zero3"], Catch::Contains("% of a step"));
  // Only rank 0 reports.
  CHECK(r.out.find("[rank 1] ") == std::string::npos);
}
