// `frugal config keys` (frugal::config_keys): every key with its type, default and what it
// accepts, read from the same rules validation checks, so that what it says is what is
// enforced: a value just past each bound it lists is refused, naming the key.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>
#include <regex>

#include "frugal/config/load.h"
#include "frugal/util/error.h"
#include "support/cli.h"
#include "support/helpers.h"

using namespace frugal;

namespace test_config_keys {

std::map<std::string, KeyInfo> by_key(const std::vector<KeyInfo>& rows) {
  std::map<std::string, KeyInfo> out;
  for (const auto& r : rows) out[r.key] = r;
  return out;
}

}  // namespace test_config_keys

using namespace test_config_keys;

TEST_CASE("config keys lists each key's type, default and the rule validation checks",
          "[unit][config]") {
  const std::vector<KeyInfo> rows = config_keys("llama");
  const auto keys = by_key(rows);
  REQUIRE(keys.size() == rows.size());
  CHECK(rows.front().key == "run.name");
  CHECK(keys.at("optim.lr").type == "float");
  CHECK(std::stod(keys.at("optim.lr").default_value) == default_config().optim.lr);
  CHECK(keys.at("optim.lr").accepts == "> 0 and <= 1e+06");
  CHECK(keys.at("data.val_fraction").accepts == "in [0, 1)");
  CHECK(keys.at("strategy.grad_scaler.backoff_factor").accepts == "in (0, 1)");
  CHECK(keys.at("optim.quant_block").accepts == "a power of two in [64, 4096]");
  CHECK(keys.at("strategy.sharding.wrap").accepts == "one of: block, size");
  CHECK_THAT(keys.at("strategy.precision").accepts,
             Catch::Contains("bf16-mixed") && Catch::Contains("registered from code"));
  CHECK(keys.at("run.device").accepts == "auto, cpu, cuda or cuda:N");
  CHECK(keys.at("memory.budget").type == "bytes");
  CHECK(keys.at("optim.betas").type == "[float, float]");
  // The model type's own keys carry its rules; another type's keys say they are not read.
  CHECK(keys.at("model.n_kv_head").accepts == ">= 0");
  CHECK(keys.at("model.n_head").accepts == ">= 1");
  CHECK(keys.at("model.rope_scaling").accepts == "one of: none, llama3");
  CHECK(keys.at("model.in_features").accepts == "(not read by model.type llama)");
  const auto mlp = by_key(config_keys("mlp"));
  CHECK(mlp.at("model.out_features").accepts == ">= 1");
  CHECK(mlp.at("model.n_kv_head").accepts == "(not read by model.type mlp)");

  // Every lower bound it lists holds: the value just below it is refused, naming the key.
  const std::regex bound(R"((>=|>) (-?[0-9.e+]+))");
  int tried = 0;
  for (const auto& r : rows) {
    std::smatch m;
    if (!std::regex_match(r.accepts, m, bound)) continue;
    if (r.type != "int" && r.type != "float" && r.type != "bytes") continue;
    const double b = std::stod(m[2]);
    const bool strict = m[1] == ">";
    const std::string value = r.type == "float"
                                  ? fmt::format("{}", strict ? b : b - 0.5)
                                  : fmt::format("{}", static_cast<int64_t>(strict ? b : b - 1));
    INFO(r.key << " accepts " << r.accepts << ", given " << value);
    CHECK_THROWS_WITH(load_config_string("model: {type: llama}\n", "c.yaml", {r.key + "=" + value}),
                      Catch::Contains(r.key));
    ++tried;
  }
  CHECK(tried >= 40);
}

TEST_CASE("frugal config keys prints the table and refuses an unknown type",
          "[integration][config]") {
  const test::CommandResult r = test::frugal("config keys --type mlp");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.out, std::regex(R"(model\.out_features +int +[0-9]+ +>= 1\n)")));
  CHECK(std::regex_search(
      r.out, std::regex(R"(strategy\.sharding\.wrap +string +"block" +one of: block, size\n)")));
  const test::CommandResult j = test::frugal("config keys --json");
  REQUIRE(j.exit_code == 0);
  const nlohmann::json rows = nlohmann::json::parse(j.out);
  CHECK(rows.size() == config_keys("gpt").size());
  const test::CommandResult bad = test::frugal("config keys --type nope");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("unknown model.type 'nope'"));
}
