// Mistakes in sub-sections (strategy.grad_scaler, strategy.checkpointing) and in memory give
// the same one-line "file:line:column: message" as flat keys, naming the full dotted path.
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "support/config_files.h"

using frugal::load_config;
using frugal::load_config_string;
using frugal_test::ConfigDir;
using frugal_test::error_for;
using frugal_test::error_of;

namespace {


// What memory.budget accepts, as its errors say it.
const std::string kBudgetForms =
    "expected a number of bytes or a size with a unit such as 512MiB, 2GiB, 1.5GB, 300MB, 64KiB "
    "(B; KiB, MiB, GiB, TiB = 1024^n; KB, MB, GB, TB = 1000^n)";

}  // namespace

TEST_CASE("config nested errors: unknown keys name the full path", "[config][bad_input]") {
  CHECK(error_for("strategy:\n  grad_scaler:\n    init_scal: 8\n") ==
        "c.yaml:3:5: unknown key 'strategy.grad_scaler.init_scal' (did you mean 'init_scale'?)");
  CHECK(error_for("strategy: {checkpointing: {polcy: full}}\n") ==
        "c.yaml:1:28: unknown key 'strategy.checkpointing.polcy' (did you mean 'policy'?)");
  CHECK(error_for("strategy:\n  grad_scalar: {}\n") ==
        "c.yaml:2:3: unknown key 'strategy.grad_scalar' (did you mean 'grad_scaler'?)");
  CHECK(error_for("memory:\n  budgt: 1GiB\n") ==
        "c.yaml:2:3: unknown key 'memory.budgt' (did you mean 'budget'?)");
  CHECK(error_for("memroy: {}\n") ==
        "c.yaml:1:1: unknown section 'memroy' (did you mean 'memory'?)");
  // A key at the wrong level: the one place the schema has that name.
  CHECK(error_for("strategy:\n  init_scale: 8\n") ==
        "c.yaml:2:3: unknown key 'strategy.init_scale' (did you mean "
        "'strategy.grad_scaler.init_scale'?)");
  CHECK(error_for("grad_scaler: {}\n") ==
        "c.yaml:1:1: unknown section 'grad_scaler' (did you mean 'strategy.grad_scaler'?)");
  CHECK(error_for("strategy:\n  checkpointing:\n    budget: 1\n") ==
        "c.yaml:3:5: unknown key 'strategy.checkpointing.budget' (did you mean "
        "'memory.budget'?)");
  // A name several sections have (type): no guess.
  CHECK(error_for("strategy:\n  type: x\n") == "c.yaml:2:3: unknown key 'strategy.type'");
  CHECK(error_for("strategy:\n  grad_scaler:\n    init_scale: 1\n    init_scale: 2\n") ==
        "c.yaml:4:5: duplicate key 'strategy.grad_scaler.init_scale' (first given at line 3)");
}

TEST_CASE("config nested errors: sub-sections that are not maps", "[config][bad_input]") {
  CHECK(error_for("strategy:\n  grad_scaler: 3\n") ==
        "c.yaml:2:3: section 'strategy.grad_scaler' must be a map of keys, got 3");
  CHECK(error_for("strategy:\n  grad_scaler: [1]\n") ==
        "c.yaml:2:3: section 'strategy.grad_scaler' must be a map of keys, got a list of 1");
  CHECK(error_for("strategy:\n  checkpointing: [full]\n") ==
        "c.yaml:2:3: section 'strategy.checkpointing' must be a map of keys or a policy name, "
        "got a list of 1");
  CHECK(error_for("memory: 1GiB\n") == "c.yaml:1:1: section 'memory' must be a map of keys, got "
                                       "'1GiB'");
}

TEST_CASE("config nested errors: wrong types", "[config][bad_input]") {
  CHECK(error_for("strategy:\n  grad_scaler:\n    init_scale: big\n") ==
        "c.yaml:3:5: strategy.grad_scaler.init_scale: expected a number, got 'big'");
  CHECK(error_for("strategy:\n  grad_scaler:\n    enabled: sometimes\n") ==
        "c.yaml:3:5: strategy.grad_scaler.enabled: expected true or false, got 'sometimes'");
  CHECK(error_for("strategy:\n  grad_scaler:\n    growth_interval: 2.5\n") ==
        "c.yaml:3:5: strategy.grad_scaler.growth_interval: expected an integer, got 2.5");
  CHECK(error_for("strategy: {checkpointing: {targets: {attn: 1}}}\n") ==
        "c.yaml:1:28: strategy.checkpointing.targets: expected a list of strings, got a map");
  CHECK(error_for("strategy:\n  checkpointing:\n    targets: [attn, [mlp]]\n") ==
        "c.yaml:3:21: strategy.checkpointing.targets[1]: expected a string, got a list of 1");
  CHECK(error_for("strategy:\n  checkpointing:\n    k: {a: 1}\n") ==
        "c.yaml:3:5: strategy.checkpointing.k: expected an integer, got a map");
  CHECK(error_for("memory:\n  record_history: 2\n") ==
        "c.yaml:2:3: memory.record_history: expected true or false, got 2");
}

TEST_CASE("config nested errors: memory.budget spellings", "[config][bad_input]") {
  CHECK(error_for("memory:\n  budget: 2 gigs\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '2 gigs'");
  CHECK(error_for("memory:\n  budget: 2GB2\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '2GB2'");
  CHECK(error_for("memory:\n  budget: 2gib\n") ==  // units are case-sensitive (b is bits)
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '2gib'");
  CHECK(error_for("memory:\n  budget: -1GiB\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '-1GiB'");
  CHECK(error_for("memory:\n  budget: 1.GiB\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '1.GiB'");
  CHECK(error_for("memory:\n  budget: 1e3MB\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got '1e3MB'");
  CHECK(error_for("memory:\n  budget: GiB\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got 'GiB'");
  CHECK(error_for("memory:\n  budget: 1.5\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got 1.5");
  CHECK(error_for("memory:\n  budget: [1]\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got a list of 1");
  CHECK(error_for("memory:\n  budget:\n") ==
        "c.yaml:2:3: memory.budget: " + kBudgetForms + ", got nothing");
  CHECK(error_for("memory:\n  budget: 1.5B\n") ==
        "c.yaml:2:3: memory.budget: 1.5B is not a whole number of bytes");
  CHECK(error_for("memory:\n  budget: 0.0001KB\n") ==
        "c.yaml:2:3: memory.budget: 0.0001KB is not a whole number of bytes");
  CHECK(error_for("memory:\n  budget: 10000000TiB\n") ==
        "c.yaml:2:3: memory.budget: 10000000TiB is out of range");
  CHECK(error_for("memory:\n  budget: 99999999999999999999\n") ==
        "c.yaml:2:3: memory.budget: 99999999999999999999 is out of range");
  CHECK(error_for("memory:\n  budget: -1\n") == "c.yaml:2:3: memory.budget: must be >= 0, got -1");
  CHECK(error_for("memory:\n  history_max_events: 0\n") ==
        "c.yaml:2:3: memory.history_max_events: must be >= 1, got 0");
  CHECK(error_for("", {"memory.budget=2XB"}) ==
        "--set memory.budget: memory.budget: " + kBudgetForms + ", got '2XB'");
}

TEST_CASE("config nested errors: out-of-range values", "[config][bad_input]") {
  const std::string gs = "strategy:\n  grad_scaler:\n    ";
  CHECK(error_for(gs + "init_scale: 0\n") ==
        "c.yaml:3:5: strategy.grad_scaler.init_scale: must be > 0, got 0");
  CHECK(error_for(gs + "init_scale: .inf\n") ==
        "c.yaml:3:5: strategy.grad_scaler.init_scale: must be > 0, got inf");
  CHECK(error_for(gs + "growth_factor: 1\n") ==
        "c.yaml:3:5: strategy.grad_scaler.growth_factor: must be > 1, got 1");
  CHECK(error_for(gs + "backoff_factor: 1\n") ==
        "c.yaml:3:5: strategy.grad_scaler.backoff_factor: must be in (0, 1), got 1");
  CHECK(error_for(gs + "backoff_factor: 0\n") ==
        "c.yaml:3:5: strategy.grad_scaler.backoff_factor: must be in (0, 1), got 0");
  CHECK(error_for(gs + "growth_interval: 0\n") ==
        "c.yaml:3:5: strategy.grad_scaler.growth_interval: must be >= 1, got 0");
  CHECK(error_for("strategy:\n  checkpointing: {policy: every_k, k: 0}\n") ==
        "c.yaml:2:36: strategy.checkpointing.k: must be >= 1, got 0");
  CHECK(error_for("strategy:\n  checkpointing:\n    policy: selective\n    targets: []\n") ==
        "c.yaml:4:5: strategy.checkpointing.targets: must name at least one of attn, mlp");
  // Left empty by --set: located there.
  CHECK(error_for("strategy: {checkpointing: selective}\n",
                  {"strategy.checkpointing.targets=[]"}) ==
        "--set strategy.checkpointing.targets: strategy.checkpointing.targets: must name at least "
        "one of attn, mlp");
  CHECK(error_for("memory:\n  monitor_every: -1\n") ==
        "c.yaml:2:3: memory.monitor_every: must be >= 0, got -1");
  CHECK(error_for("memory:\n  empty_cache_every: -2\n") ==
        "c.yaml:2:3: memory.empty_cache_every: must be >= 0, got -2");
}

TEST_CASE("config nested errors: names outside their closed sets", "[config][bad_input]") {
  CHECK(error_for("strategy: {precision: fp33}\n") ==
        "c.yaml:1:12: strategy.precision: unknown value 'fp33' (expected one of: fp32, "
        "bf16-mixed, fp16-mixed, auto) (did you mean 'fp32'?)");
  CHECK(error_for("strategy:\n  precision: bf16\n") ==
        "c.yaml:2:3: strategy.precision: unknown value 'bf16' (expected one of: fp32, "
        "bf16-mixed, fp16-mixed, auto) (did you mean 'bf16-mixed'?)");
  CHECK(error_for("strategy:\n  checkpointing:\n    policy: selectiv\n") ==
        "c.yaml:3:5: strategy.checkpointing.policy: unknown value 'selectiv' (expected one of: "
        "none, full, every_k, selective, auto) (did you mean 'selective'?)");
  // The shorthand is located at its key.
  CHECK(error_for("strategy:\n  checkpointing: ful\n") ==
        "c.yaml:2:3: strategy.checkpointing.policy: unknown value 'ful' (expected one of: none, "
        "full, every_k, selective, auto) (did you mean 'full'?)");
  // Each target at its own place in the list.
  CHECK(error_for("strategy:\n  checkpointing:\n    targets: [attn, mlpp]\n") ==
        "c.yaml:3:21: strategy.checkpointing.targets[1]: unknown value 'mlpp' (expected one of: "
        "attn, mlp) (did you mean 'mlp'?)");
  CHECK(error_for("strategy:\n  checkpointing:\n    targets:\n      - ffn\n") ==
        "c.yaml:4:9: strategy.checkpointing.targets[0]: unknown value 'ffn' (expected one of: "
        "attn, mlp)");
  // Sharding's keys.
  CHECK(error_for("strategy:\n  sharding: zero4\n") ==
        "c.yaml:2:3: strategy.sharding.mode: unknown value 'zero4' (expected one of: none, ddp, "
        "zero1, zero2, zero3, hsdp) (did you mean 'zero1'?)");
  CHECK(error_for("strategy:\n  sharding: {mode: zero3, wrap: layer}\n") ==
        "c.yaml:2:27: strategy.sharding.wrap: unknown value 'layer' (expected one of: block, "
        "size)");
  CHECK(error_for("strategy:\n  sharding:\n    param_dtype: bfloat16\n") ==
        "c.yaml:3:5: strategy.sharding.param_dtype: unknown value 'bfloat16' (expected one of: "
        "auto, fp32, bf16, fp16)");
  CHECK(error_for("strategy:\n  sharding:\n    prefetch: -1\n") ==
        "c.yaml:3:5: strategy.sharding.prefetch: must be >= 0, got -1");
  CHECK(error_for("strategy:\n  sharding:\n    unit_mb: 0\n") ==
        "c.yaml:3:5: strategy.sharding.unit_mb: must be > 0, got 0");
  CHECK(error_for("strategy:\n  sharding: zero2\n  offload: {params: true}\n") ==
        "c.yaml:3:13: strategy.offload.params: needs strategy.sharding.mode zero3 (only zero3 "
        "shards the parameters), got 'zero2'");
  // Offload's keys: where the optimizer goes, and nvme's directory and ring.
  CHECK(error_for("strategy:\n  offload: {optimizer: disk}\n") ==
        "c.yaml:2:13: strategy.offload.optimizer: expected false, true (= ram), ram or nvme, got "
        "'disk'");
  CHECK(error_for("strategy:\n  offload: {optimizer: nvme}\n") ==
        "c.yaml:2:13: strategy.offload.nvme_path: is needed with offload.optimizer nvme: a "
        "directory on a fast local disk for the optimizer state files");
  CHECK(error_for("strategy:\n  offload: {optimizer: nvme, nvme_path: /x, buffer_mb: 0}\n") ==
        "c.yaml:2:45: strategy.offload.buffer_mb: must be > 0, got 0");
  // The mixed precisions are accepted (the engine decides what it can run).
  CHECK_NOTHROW(load_config_string("strategy: {precision: bf16-mixed}\n", "c.yaml"));
  CHECK_NOTHROW(load_config_string("strategy: {precision: fp16-mixed}\n", "c.yaml"));
}

TEST_CASE("config nested errors: overrides and parents", "[config][bad_input]") {
  CHECK(error_for("", {"strategy.grad_scaler.init_scal=1"}) ==
        "--set strategy.grad_scaler.init_scal: unknown key 'strategy.grad_scaler.init_scal' "
        "(did you mean 'init_scale'?)");
  CHECK(error_for("", {"strategy.grad_scaler.init_scale=0"}) ==
        "--set strategy.grad_scaler.init_scale: strategy.grad_scaler.init_scale: must be > 0, "
        "got 0");
  CHECK(error_for("", {"strategy.checkpointing=fulll"}) ==
        "--set strategy.checkpointing: strategy.checkpointing.policy: unknown value 'fulll' "
        "(expected one of: none, full, every_k, selective, auto) (did you mean 'full'?)");
  CHECK(error_for("", {"strategy.grad_scaler=3"}) ==
        "--set strategy.grad_scaler: section 'strategy.grad_scaler' must be a map of keys, got 3");
  CHECK(error_for("", {"strategy.checkpointing.targets=[attn, x]"}) ==
        "--set strategy.checkpointing.targets: strategy.checkpointing.targets[1]: unknown value "
        "'x' (expected one of: attn, mlp)");

  ConfigDir dir;
  const std::string parent =
      dir.write("parent.yaml", "strategy:\n  grad_scaler:\n    growth_factor: 1\n");
  const std::string child = dir.write("child.yaml", "extends: parent.yaml\nmemory: {}\n");
  CHECK(error_of([&] { load_config(child); }) ==
        parent + ":3:5: strategy.grad_scaler.growth_factor: must be > 1, got 1");
  const std::string fixed = dir.write(
      "fixed.yaml", "extends: parent.yaml\nstrategy: {grad_scaler: {growth_factor: 0.5}}\n");
  CHECK(error_of([&] { load_config(fixed); }) ==
        fixed + ":2:26: strategy.grad_scaler.growth_factor: must be > 1, got 0.5");
}

TEST_CASE("config errors: transposed letters and other trainers' names are recognised",
          "[config][bad_input]") {
  // One swap of neighbours is one edit, as a typist counts it.
  CHECK(error_for("trian: {max_steps: 3}\n") ==
        "c.yaml:1:1: unknown section 'trian' (did you mean 'train'?)");
  CHECK(error_for("optim: {lr: 0.1, wieght_decay: 0.1}\n") ==
        "c.yaml:1:18: unknown key 'optim.wieght_decay' (did you mean 'weight_decay'?)");
  // Names from Hugging Face's TrainingArguments, Lightning and nanoGPT, wherever written.
  CHECK(error_for("optim: {learning_rate: 0.1}\n") ==
        "c.yaml:1:9: unknown key 'optim.learning_rate' (did you mean 'optim.lr'?)");
  CHECK(error_for("train: {batch_size: 8}\n") ==
        "c.yaml:1:9: unknown key 'train.batch_size' (did you mean 'data.micro_batch_size'?)");
  CHECK(error_for("data: {batch_size: 8}\n") ==
        "c.yaml:1:8: unknown key 'data.batch_size' (did you mean 'data.micro_batch_size'?)");
  CHECK(error_for("train: {gradient_accumulation_steps: 4}\n") ==
        "c.yaml:1:9: unknown key 'train.gradient_accumulation_steps' (did you mean "
        "'strategy.accumulation'?)");
}

TEST_CASE("a --set value with ': ' is text for a key that is not a section, and ':' for '=' is "
          "explained",
          "[config][bad_input]") {
  const auto cfg = load_config_string("model: {type: gpt}\n", "c.yaml",
                                      {"generate.prompt=Q: what is 2+2? A:"});
  CHECK(cfg.generate.prompt == "Q: what is 2+2? A:");
  // A section still takes a map written in one line.
  const auto scaled = load_config_string("model: {type: gpt}\n", "c.yaml",
                                         {"strategy.grad_scaler={init_scale: 8}"});
  CHECK(scaled.strategy.grad_scaler.init_scale == 8.0);
  CHECK(error_of([] { load_config_string("model: {type: gpt}\n", "c.yaml", {"optim.lr: 0.1"}); }) ==
        "--set optim.lr: 0.1: expected section.key=value, got 'optim.lr: 0.1' (--set takes '=' "
        "where YAML writes ':', e.g. --set optim.lr=1e-3)");
}
