// Sub-sections (strategy.grad_scaler, strategy.checkpointing), the checkpointing shorthand,
// memory.budget's units, and how all of them pass through extends, --set, to_yaml and the
// fingerprint.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "frugal/config/load.h"
#include "support/config_files.h"

using frugal::Config;
using frugal::load_config;
using frugal::load_config_string;
using frugal::OptimizerPlace;
using frugal_test::ConfigDir;

namespace {

using Targets = std::vector<std::string>;

Config from(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return load_config_string(yaml, "nested.yaml", overrides);
}

}  // namespace

TEST_CASE("config nested: sub-sections and memory are read", "[config][unit]") {
  SECTION("block style") {
    const Config c = from(R"(
strategy:
  precision: fp16-mixed
  grad_scaler:
    enabled: false
    init_scale: 1024
    growth_factor: 4
    backoff_factor: 0.25
    growth_interval: 100
  accumulation: 2
  checkpointing:
    policy: selective
    k: 3
    targets:
      - attn
      - mlp
memory:
  monitor_every: 5
  empty_cache_every: 100
  budget: 2GiB
  record_history: true
)");
    CHECK(c.strategy.precision == "fp16-mixed");
    CHECK_FALSE(c.strategy.grad_scaler.enabled);
    CHECK(c.strategy.grad_scaler.init_scale == 1024.0);
    CHECK(c.strategy.grad_scaler.growth_factor == 4.0);
    CHECK(c.strategy.grad_scaler.backoff_factor == 0.25);
    CHECK(c.strategy.grad_scaler.growth_interval == 100);
    CHECK(c.strategy.accumulation == 2);
    CHECK(c.strategy.checkpointing.policy == "selective");
    CHECK(c.strategy.checkpointing.k == 3);
    CHECK(c.strategy.checkpointing.targets == Targets{"attn", "mlp"});
    CHECK(c.memory.monitor_every == 5);
    CHECK(c.memory.empty_cache_every == 100);
    CHECK(c.memory.budget == 2147483648);
    CHECK(c.memory.record_history);
  }
  SECTION("flow style; keys left out keep their defaults") {
    const Config c = from("strategy: {precision: bf16-mixed, grad_scaler: {init_scale: 8}}\n");
    CHECK(c.strategy.precision == "bf16-mixed");
    CHECK(c.strategy.grad_scaler.init_scale == 8.0);
    CHECK(c.strategy.grad_scaler.growth_interval == 2000);
    CHECK(c.strategy.grad_scaler.enabled);
    CHECK(c.strategy.checkpointing.policy == "none");
    CHECK(c.memory.budget == 0);
  }
  SECTION("an empty sub-section changes nothing") {
    const Config c = from("strategy:\n  grad_scaler:\n  checkpointing:\nmemory:\n");
    CHECK(frugal::to_yaml(c) == frugal::to_yaml(Config{}));
  }
  SECTION("the defaults are the struct defaults") {
    const Config c = frugal::default_config();
    CHECK(c.strategy.grad_scaler.init_scale == 65536.0);
    CHECK(c.strategy.checkpointing.policy == "none");
    CHECK(c.strategy.checkpointing.k == 2);
    CHECK(c.strategy.checkpointing.targets == Targets{"attn"});
    CHECK(c.memory.budget == 0);
    CHECK_FALSE(c.memory.record_history);
  }
}

TEST_CASE("config nested: checkpointing: <policy> is short for {policy: <policy>}",
          "[config][unit]") {
  for (const char* policy : {"none", "full", "every_k", "selective"}) {
    INFO(policy);
    const Config c = from(std::string("strategy:\n  checkpointing: ") + policy + "\n");
    CHECK(c.strategy.checkpointing.policy == policy);
    CHECK(c.strategy.checkpointing.k == 2);  // the rest at the defaults
    CHECK(c.strategy.checkpointing.targets == Targets{"attn"});
    // The same through --set, and in flow style.
    const Config set = from("", {std::string("strategy.checkpointing=") + policy});
    CHECK(set.strategy.checkpointing.policy == policy);
    const Config flow = from(std::string("strategy: {checkpointing: ") + policy + "}\n");
    CHECK(flow.strategy.checkpointing.policy == policy);
  }
  SECTION("a shorthand merges like the map it stands for") {
    // --set of one key over a file's shorthand keeps the policy.
    const Config k = from("strategy: {checkpointing: every_k}\n", {"strategy.checkpointing.k=4"});
    CHECK(k.strategy.checkpointing.policy == "every_k");
    CHECK(k.strategy.checkpointing.k == 4);
    // A shorthand over a parent's map changes the policy and keeps the parent's other keys.
    ConfigDir dir;
    dir.write("parent.yaml", "strategy:\n  checkpointing: {policy: every_k, k: 4}\n");
    const Config child = load_config(dir.write("child.yaml",
                                               "extends: parent.yaml\n"
                                               "strategy: {checkpointing: full}\n"));
    CHECK(child.strategy.checkpointing.policy == "full");
    CHECK(child.strategy.checkpointing.k == 4);
    // --set with the shorthand over a file's map.
    const Config over =
        from("strategy:\n  checkpointing:\n    policy: selective\n    targets: [mlp]\n",
             {"strategy.checkpointing=full"});
    CHECK(over.strategy.checkpointing.policy == "full");
    CHECK(over.strategy.checkpointing.targets == Targets{"mlp"});
  }
}

TEST_CASE("config nested: memory.budget takes bytes or a size with a unit", "[config][unit]") {
  const std::pair<const char*, int64_t> table[] = {
      {"0", 0},
      {"1048576", 1048576},
      {"1e9", 1000000000},  // an integral float, as for any integer key
      {"\"4096\"", 4096},
      {"100B", 100},
      {"64KiB", 65536},
      {"512MiB", 536870912},
      {"2GiB", 2147483648},
      {"1TiB", 1099511627776},
      {"1KB", 1000},
      {"300MB", 300000000},
      {"1.5GB", 1500000000},
      {"1.1GB", 1100000000},  // exact: no floating-point rounding
      {"2TB", 2000000000000},
      {"0.5KiB", 512},
      {"0.3KB", 300},
      {"0GiB", 0},
      {"1.50KiB", 1536},
      {"\"2 GiB\"", 2147483648},
  };
  for (const auto& [text, bytes] : table) {
    INFO(text);
    CHECK(from(std::string("memory: {budget: ") + text + "}\n").memory.budget == bytes);
  }
  CHECK(from("", {"memory.budget=512MiB"}).memory.budget == 536870912);
  CHECK(from("memory: {budget: 9223372036854775807B}\n").memory.budget == INT64_MAX);
}

TEST_CASE("config nested: --set reaches keys at any depth", "[config][unit]") {
  const Config c = from("strategy:\n  grad_scaler: {init_scale: 2, growth_interval: 7}\n",
                        {"strategy.grad_scaler.init_scale=1024",
                         "strategy.checkpointing.policy=full",
                         "strategy.checkpointing.targets=[attn, mlp]",
                         "strategy.grad_scaler={backoff_factor: 0.125}",
                         "strategy.precision=fp16-mixed", "memory.record_history=true"});
  CHECK(c.strategy.grad_scaler.init_scale == 1024.0);
  CHECK(c.strategy.grad_scaler.growth_interval == 7);  // a map value merges into the file's map
  CHECK(c.strategy.grad_scaler.backoff_factor == 0.125);
  CHECK(c.strategy.checkpointing.policy == "full");
  CHECK(c.strategy.checkpointing.targets == Targets{"attn", "mlp"});
  CHECK(c.strategy.precision == "fp16-mixed");
  CHECK(c.memory.record_history);
}

TEST_CASE("config nested: extends merges sub-sections key by key", "[config][unit]") {
  ConfigDir dir;
  dir.write("base.yaml", R"(
strategy:
  precision: bf16-mixed
  grad_scaler: {init_scale: 1024, growth_interval: 10}
  checkpointing: {policy: every_k, k: 4, targets: [mlp]}
memory: {budget: 1GiB, empty_cache_every: 50}
)");
  const Config c = load_config(dir.write("run.yaml", R"(
extends: base.yaml
strategy:
  grad_scaler:
    growth_interval: 20
  checkpointing:
    k: 3
    targets: [attn]   # lists are replaced whole
memory:
  monitor_every: 5
)"));
  CHECK(c.strategy.precision == "bf16-mixed");
  CHECK(c.strategy.grad_scaler.init_scale == 1024.0);
  CHECK(c.strategy.grad_scaler.growth_interval == 20);
  CHECK(c.strategy.checkpointing.policy == "every_k");
  CHECK(c.strategy.checkpointing.k == 3);
  CHECK(c.strategy.checkpointing.targets == Targets{"attn"});
  CHECK(c.memory.budget == 1073741824);
  CHECK(c.memory.empty_cache_every == 50);
  CHECK(c.memory.monitor_every == 5);
}

TEST_CASE("config nested: to_yaml writes sub-sections as nested maps and reads them back",
          "[config][unit]") {
  SECTION("the defaults, exactly") {
    const std::string text = frugal::to_yaml(Config{});
    const std::string expected =
        "strategy:\n"
        "  precision: \"fp32\"\n"
        "  grad_scaler:\n"
        "    enabled: true\n"
        "    init_scale: 65536.0\n"
        "    growth_factor: 2.0\n"
        "    backoff_factor: 0.5\n"
        "    growth_interval: 2000\n"
        "  accumulation: 1\n"
        "  checkpointing:\n"
        "    policy: \"none\"\n"
        "    k: 2\n"
        "    targets: [\"attn\"]\n"
        "    memory_budget: 0\n"
        "  sharding:\n"
        "    mode: \"none\"\n"
        "    bucket_mb: 25.0\n"
        "    wrap: \"block\"\n"
        "    unit_mb: 25.0\n"
        "    param_dtype: \"auto\"\n"
        "    reduce_dtype: \"auto\"\n"
        "    prefetch: 1\n"
        "    accumulate_sharded: true\n"
        "    shard_size: 0\n"
        "  offload:\n"
        "    optimizer: false\n"
        "    nvme_path: \"\"\n"
        "    buffer_mb: 64.0\n"
        "    nvme_require_direct: false\n"
        "    params: false\n"
        "    pin_memory: true\n"
        "    activations: false\n"
        "    activation_prefetch: 1\n"
        "memory:\n"
        "  monitor_every: 0\n"
        "  empty_cache_every: 0\n"
        "  budget: 0\n"
        "  record_history: false\n"
        "  history_max_events: 1000000\n"
        "  host_allocator: \"tuned\"\n"
        "distributed:\n";
    INFO(text);
    CHECK(text.find(expected) != std::string::npos);
  }
  SECTION("every new key changed") {
    Config c;
    c.strategy.precision = "fp16-mixed";
    c.strategy.grad_scaler = {false, 1.0 / 3.0, 1.0 + 1e-15, std::nextafter(1.0, 0.0), 1};
    c.strategy.accumulation = 3;
    c.strategy.checkpointing = {"selective", 5, {"mlp", "attn", "mlp"}};
    c.strategy.sharding = {"zero3", 0.5, "size", 3.5, "bf16", "fp32", 2, false};
    c.memory = {7, 9, INT64_MAX, true, "system", 12345};
    c.strategy.offload.optimizer = OptimizerPlace::nvme;
    c.strategy.offload.nvme_path = "/scratch";
    c.strategy.offload.buffer_mb = 0.25;
    c.strategy.offload.nvme_require_direct = true;
    const std::string text = frugal::to_yaml(c);
    INFO(text);
    CHECK(text.find("  budget: 9223372036854775807\n") != std::string::npos);  // bytes
    CHECK(text.find("    targets: [\"mlp\", \"attn\", \"mlp\"]\n") != std::string::npos);
    const Config back = load_config_string(text, "dump.yaml");
    CHECK(frugal::to_yaml(back) == text);
    CHECK(back.strategy.grad_scaler.enabled == c.strategy.grad_scaler.enabled);
    CHECK(back.strategy.grad_scaler.init_scale == c.strategy.grad_scaler.init_scale);
    CHECK(back.strategy.grad_scaler.growth_factor == c.strategy.grad_scaler.growth_factor);
    CHECK(back.strategy.grad_scaler.backoff_factor == c.strategy.grad_scaler.backoff_factor);
    CHECK(back.strategy.grad_scaler.growth_interval == 1);
    CHECK(back.strategy.checkpointing.policy == "selective");
    CHECK(back.strategy.checkpointing.k == 5);
    CHECK(back.strategy.checkpointing.targets == c.strategy.checkpointing.targets);
    CHECK(back.memory.monitor_every == 7);
    CHECK(back.memory.empty_cache_every == 9);
    CHECK(back.memory.budget == INT64_MAX);
    CHECK(back.memory.record_history);
    CHECK(back.memory.history_max_events == 12345);
    CHECK(back.strategy.sharding.mode == "zero3");
    CHECK(back.strategy.sharding.wrap == "size");
    CHECK(back.strategy.sharding.unit_mb == 3.5);
    CHECK(back.strategy.sharding.param_dtype == "bf16");
    CHECK(back.strategy.sharding.reduce_dtype == "fp32");
    CHECK(back.strategy.sharding.prefetch == 2);
    CHECK_FALSE(back.strategy.sharding.accumulate_sharded);
    CHECK(back.memory.host_allocator == "system");
    CHECK(back.strategy.sharding.bucket_mb == 0.5);
    CHECK(text.find("    optimizer: nvme\n") != std::string::npos);
    CHECK(back.strategy.offload.optimizer == OptimizerPlace::nvme);
    CHECK(back.strategy.offload.nvme_path == "/scratch");
    CHECK(back.strategy.offload.buffer_mb == 0.25);
    CHECK(back.strategy.offload.nvme_require_direct);
  }
  SECTION("offload.optimizer reads booleans, ram and nvme") {
    for (const auto& [spelling, where] :
         std::vector<std::pair<std::string, OptimizerPlace::Where>>{{"true", OptimizerPlace::ram},
                                                                    {"false", OptimizerPlace::none},
                                                                    {"ram", OptimizerPlace::ram},
                                                                    {"nvme", OptimizerPlace::nvme}}) {
      INFO(spelling);
      const std::string nvme = spelling == "nvme" ? ", nvme_path: /x" : "";
      const Config c = load_config_string(
          "strategy: {offload: {optimizer: " + spelling + nvme + "}}\n", "o.yaml");
      CHECK(c.strategy.offload.optimizer == OptimizerPlace(where));
    }
  }
}

TEST_CASE("config nested: the fingerprint keeps strategy but not checkpointing or memory",
          "[config][unit]") {
  const Config base;
  const std::string fp = frugal::config_fingerprint(base);
  auto changed = [&](auto edit) {
    Config c = base;
    edit(c);
    return frugal::config_fingerprint(c) != fp;
  };
  CHECK(changed([](Config& c) { c.strategy.precision = "bf16-mixed"; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.enabled = false; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.init_scale = 1024; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.growth_factor = 3; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.backoff_factor = 0.25; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.growth_interval = 10; }));
  // Memory-only settings (and the cut of the global batch, checked apart at resume): a run may be resumed with them changed.
  CHECK_FALSE(changed([](Config& c) { c.strategy.checkpointing.policy = "full"; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.checkpointing.k = 5; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.checkpointing.targets = {"mlp"}; }));
  CHECK_FALSE(changed([](Config& c) { c.memory.monitor_every = 3; }));
  CHECK_FALSE(changed([](Config& c) { c.memory.empty_cache_every = 3; }));
  CHECK_FALSE(changed([](Config& c) { c.memory.budget = 1 << 30; }));
  CHECK_FALSE(changed([](Config& c) { c.memory.record_history = true; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.accumulation = 4; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.sharding.prefetch = 2; }));

  // The same through files: turning checkpointing on for a resume keeps the fingerprint.
  const Config off = from("strategy: {accumulation: 2}\n");
  const Config on =
      from("strategy: {accumulation: 2, checkpointing: full}\nmemory: {budget: 1GB}\n");
  CHECK(frugal::config_fingerprint(off) == frugal::config_fingerprint(on));
}
