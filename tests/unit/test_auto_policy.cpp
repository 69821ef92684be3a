// strategy.checkpointing.policy: auto and its memory_budget: the spellings, the errors, and
// the choice (the cheapest policy in time whose traced peak fills at most 90% of the budget)
// on the default GPT, whose policies' peaks are far apart.
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/memory/auto_policy.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

namespace {

std::string auto_policy_error(const std::string& yaml) {
  try {
    load_config_string(yaml, "c.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Config default_gpt_on_synthetic(const std::string& budget) {
  return load_config((test::source_dir() / "configs/default.yaml").string(),
                     {"run.device=cpu", "data.type=synthetic", "data.synthetic_samples=512",
                      "strategy.checkpointing.policy=auto", "memory.budget=" + budget});
}

}  // namespace

TEST_CASE("strategy.checkpointing.memory_budget: a size or a share of the device",
          "[unit][config][auto_policy]") {
  const auto with = [](const std::string& v) {
    return load_config_string("strategy:\n  checkpointing: {policy: auto, memory_budget: " + v + "}\n",
                              "c.yaml").strategy.checkpointing.memory_budget;
  };
  CHECK(with("20GiB").bytes == (int64_t{20} << 30));
  CHECK(with("20GiB").fraction == 0.0);
  CHECK(with("0.8").fraction == 0.8);
  CHECK(with("0.8").bytes == 0);
  CHECK(with("1").fraction == 1.0);
  CHECK(with("3000000").bytes == 3000000);
  CHECK(auto_policy_error("strategy:\n  checkpointing: {policy: auto, memory_budget: -0.5}\n") ==
        "c.yaml:2:33: strategy.checkpointing.memory_budget: must be >= 0, got -0.5");
  CHECK(auto_policy_error("strategy:\n  checkpointing: {policy: auto, memory_budget: 1.5}\n")
            .find("strategy.checkpointing.memory_budget: expected a number of bytes") != std::string::npos);
  CHECK(auto_policy_error("strategy:\n  checkpointing: {policy: full, memory_budget: 2GiB}\n")
            .find("strategy.checkpointing.memory_budget: applies to policy auto only") != std::string::npos);
}

TEST_CASE("policy auto picks the cheapest policy whose traced peak fits the budget",
          "[unit][memory][auto_policy]") {
  const c10::Device cpu(c10::kCPU);
  // The default GPT (micro-batch 32): none ~268 MiB, selective (attn) ~139, full ~88.
  for (const auto& [budget, expected] : std::vector<std::pair<std::string, std::string>>{
           {"400MiB", "none"}, {"170MiB", "selective"}, {"110MiB", "full"}}) {
    INFO(budget);
    const Config cfg = default_gpt_on_synthetic(budget);
    const memory::AutoPolicyChoice choice = memory::choose_checkpointing(cfg, cpu, 1);
    CHECK(choice.fits);
    CHECK(choice.budget == load_config_string("memory: {budget: " + budget + "}\n", "b").memory.budget);
    CHECK(choice.chosen().checkpointing.policy == expected);
    CHECK(choice.chosen().predicted_peak <= memory::kAutoPolicyFill * choice.budget);
    // Every policy before it was predicted not to fit.
    for (size_t i = 0; i + 1 < choice.considered.size(); ++i) {
      CHECK(choice.considered[i].predicted_peak > memory::kAutoPolicyFill * choice.budget);
    }
  }
  // Nothing fits: the last, smallest candidate, and fits = false.
  const auto tight = memory::choose_checkpointing(default_gpt_on_synthetic("30MiB"), cpu, 1);
  CHECK_FALSE(tight.fits);
  CHECK(tight.chosen().label() == "full + activation offload");
  CHECK(tight.considered.size() == 5);
  // The CPU without any budget cannot choose.
  Config none = default_gpt_on_synthetic("0");
  CHECK_THROWS_WITH(memory::choose_checkpointing(none, cpu, 1),
                    Catch::Contains("auto on the CPU needs a budget"));
}

TEST_CASE("the policy name auto cannot be registered", "[unit][auto_policy]") {
  CHECK_THROWS_WITH(register_checkpointing_policy(
                        "auto", [](int64_t, int64_t, const CheckpointingConfig&) {
                          return std::vector<std::string>{};
                        }),
                    Catch::Contains("the name auto is taken"));
}
