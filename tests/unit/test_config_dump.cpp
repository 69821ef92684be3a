// to_yaml round trips exactly; the fingerprint follows only what changes training.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "frugal/config/load.h"
#include "support/config_files.h"

using frugal::Config;

namespace {

// A config with awkward values everywhere: doubles without a short decimal form, strings that
// YAML would read as something else, control characters, unicode.
Config awkward_config() {
  Config c;
  c.run.name = "null";
  c.run.dir = "runs: \"quoted\" # not a comment";
  c.run.seed = 18446744073709551615ull;
  c.run.resume = "~";
  c.model.type = "my-model";
  c.model.size = "gpt-mini";
  c.model.dropout = 0.1 + 0.2;  // 0.30000000000000004
  c.model.hidden = {};
  c.model.channels = {1, 2, 3};
  c.model.options = {{"true", ""}, {"key with: colon", "line1\nline2\t\x01"}, {"ü", "é"}};
  c.data.val_fraction = 1.0 / 3.0;
  c.data.seq_len = 7;
  c.optim.lr = 6e-4 / 7;
  c.optim.betas = {std::nextafter(0.9, 1.0), 1e-300};
  c.optim.eps = 5e-324;  // the smallest subnormal
  c.optim.weight_decay = 1e22;
  c.schedule.min_lr = 1e-20;
  c.schedule.gamma = 2.0 / 3.0;
  c.generate.temperature = 123456789.125;
  c.generate.prompt = "\n\"'\\";
  c.strategy.grad_scaler.init_scale = 1.0 / 7.0;
  c.strategy.grad_scaler.backoff_factor = 5e-324;
  c.strategy.checkpointing.targets = {"mlp", "attn"};
  c.memory.budget = 9223372036854775807;
  c.distributed.timeout_s = 1e-7;
  return c;
}

}  // namespace

TEST_CASE("config: to_yaml -> load reproduces the config exactly", "[config][unit]") {
  for (const Config& original : {Config{}, awkward_config()}) {
    const std::string text = frugal::to_yaml(original);
    const Config back = frugal::load_config_string(text, "dump.yaml");
    INFO(text);
    CHECK(frugal::to_yaml(back) == text);
    // Bit-exact doubles, checked directly rather than through their text.
    CHECK(back.model.dropout == original.model.dropout);
    CHECK(back.data.val_fraction == original.data.val_fraction);
    CHECK(back.optim.lr == original.optim.lr);
    CHECK(back.optim.betas == original.optim.betas);
    CHECK(back.optim.eps == original.optim.eps);
    CHECK(back.optim.weight_decay == original.optim.weight_decay);
    CHECK(back.schedule.min_lr == original.schedule.min_lr);
    CHECK(back.schedule.gamma == original.schedule.gamma);
    CHECK(back.generate.temperature == original.generate.temperature);
    CHECK(back.distributed.timeout_s == original.distributed.timeout_s);
    CHECK(back.strategy.grad_scaler.init_scale == original.strategy.grad_scaler.init_scale);
    CHECK(back.strategy.grad_scaler.backoff_factor ==
          original.strategy.grad_scaler.backoff_factor);
    CHECK(back.strategy.checkpointing.targets == original.strategy.checkpointing.targets);
    CHECK(back.memory.budget == original.memory.budget);
    CHECK(back.run.name == original.run.name);
    CHECK(back.run.dir == original.run.dir);
    CHECK(back.run.seed == original.run.seed);
    CHECK(back.run.resume == original.run.resume);
    CHECK(back.model.hidden == original.model.hidden);
    CHECK(back.model.channels == original.model.channels);
    CHECK(back.model.options == original.model.options);
    CHECK(back.generate.prompt == original.generate.prompt);
  }
}

TEST_CASE("config: to_yaml lists every section and the keys the chosen types read",
          "[config][unit]") {
  const std::string text = frugal::to_yaml(Config{});  // a GPT on synthetic data
  for (const char* section : {"run:\n", "model:\n", "data:\n", "optim:\n", "schedule:\n",
                              "train:\n", "generate:\n", "strategy:\n", "  grad_scaler:\n",
                              "  checkpointing:\n", "memory:\n", "distributed:\n"})
    CHECK(text.find(section) != std::string::npos);
  CHECK(text.find("  lr: 0.0003\n") != std::string::npos);
  CHECK(text.find("  betas: [0.9, 0.999]\n") != std::string::npos);
  CHECK(text.find("  n_embd: 128\n") != std::string::npos);
  CHECK(text.find("  synthetic_samples: 4096\n") != std::string::npos);
  // Not read by a GPT on synthetic data: the MLP's and the ConvNet's sizes, free options for
  // user models, the file-based data types' keys.
  for (const char* absent : {"  hidden:", "  channels:", "  in_features:", "  options:", "  path:",
                             "  labels_path:", "  token_format:"})
    CHECK(text.find(absent) == std::string::npos);
  Config mlp;
  mlp.model.type = "mlp";
  mlp.data.type = "idx";
  mlp.data.path = "images.idx";
  const std::string mlp_text = frugal::to_yaml(mlp);
  INFO(mlp_text);
  CHECK(mlp_text.find("  hidden: [64, 64]\n") != std::string::npos);
  CHECK(mlp_text.find("  labels_path: \"\"\n") != std::string::npos);
  CHECK(mlp_text.find("  path: \"images.idx\"\n") != std::string::npos);
  for (const char* absent : {"  n_embd:", "  kernels:", "  channels:", "  synthetic_samples:"})
    CHECK(mlp_text.find(absent) == std::string::npos);
  // A model type registered by the user may read any model key: all are kept.
  Config mine;
  mine.model.type = "my-model";
  const std::string mine_text = frugal::to_yaml(mine);
  CHECK(mine_text.find("  hidden: [64, 64]\n") != std::string::npos);
  CHECK(mine_text.find("  n_embd: 128\n") != std::string::npos);
  CHECK(mine_text.find("  options: {}\n") != std::string::npos);
  CHECK(text.find("  eps: 1.0e-08\n") != std::string::npos);  // a float to every YAML reader
  CHECK(text.find("  timeout_s: 300.0\n") != std::string::npos);
  CHECK(text.find("  prompt: \"\\n\"\n") != std::string::npos);
}

TEST_CASE("config: fingerprint follows what changes the training numbers", "[config][unit]") {
  const Config base;
  const std::string fp = frugal::config_fingerprint(base);
  CHECK(fp.size() == 16);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(frugal::config_fingerprint(Config{}) == fp);  // deterministic

  auto changed = [&](auto edit) {
    Config c = base;
    edit(c);
    return frugal::config_fingerprint(c) != fp;
  };
  // Sections that change what is computed.
  CHECK(changed([](Config& c) { c.model.n_layer = 3; }));
  // A user-registered model's options; keys the model type does not read are not hashed.
  const std::string registered = [&] {
    Config c = base;
    c.model.type = "my-model";
    return frugal::config_fingerprint(c);
  }();
  CHECK(registered != fp);
  CHECK([&] {
    Config c = base;
    c.model.type = "my-model";
    c.model.options["x"] = "1";
    return frugal::config_fingerprint(c) != registered;
  }());
  CHECK_FALSE(changed([](Config& c) { c.model.options["x"] = "1"; }));  // gpt reads no options
  CHECK_FALSE(changed([](Config& c) { c.model.n_kv_head = 2; }));       // llama's, not gpt's
  CHECK(changed([](Config& c) { c.data.path = "other.bin"; }));
  CHECK(changed([](Config& c) { c.optim.lr = 1e-3; }));
  CHECK(changed([](Config& c) { c.schedule.warmup_steps = 5; }));
  CHECK(changed([](Config& c) { c.strategy.precision = "fp16-mixed"; }));
  CHECK(changed([](Config& c) { c.strategy.grad_scaler.init_scale = 2; }));
  // Things that don't.
  CHECK_FALSE(changed([](Config& c) { c.run.name = "other"; }));
  CHECK_FALSE(changed([](Config& c) { c.run.resume = "auto"; }));
  CHECK_FALSE(changed([](Config& c) { c.train.max_steps = 5; }));
  CHECK_FALSE(changed([](Config& c) { c.train.log_every = 1; }));
  CHECK_FALSE(changed([](Config& c) { c.generate.tokens = 100; }));
  CHECK_FALSE(changed([](Config& c) { c.data.num_workers = 8; }));
  CHECK_FALSE(changed([](Config& c) { c.data.pin_memory = true; }));
  CHECK_FALSE(changed([](Config& c) { c.distributed.backend = "gloo"; }));
  CHECK_FALSE(changed([](Config& c) { c.model.size = "gpt-mini"; }));  // only its sizes count
  // How the global batch is cut (the trainer compares the global batch itself at resume),
  // and how the state is spread over ranks (sharded checkpoints reshard).
  CHECK_FALSE(changed([](Config& c) { c.data.micro_batch_size = 3; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.accumulation = 2; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.sharding.mode = "zero3"; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.offload.optimizer = true; }));
  CHECK_FALSE(changed([](Config& c) { c.strategy.offload.activations = true; }));
  CHECK_FALSE(changed([](Config& c) { c.source = "elsewhere.yaml"; }));
  // Memory-only: resuming may turn them on or off (test_config_nested.cpp has each key).
  CHECK_FALSE(changed([](Config& c) { c.strategy.checkpointing.policy = "full"; }));
  CHECK_FALSE(changed([](Config& c) { c.memory.budget = 1000; }));
}

TEST_CASE("config: a refused resume names the fingerprinted settings that differ", "[config][unit]") {
  Config saved, ours;
  ours.model.n_embd = saved.model.n_embd * 2;
  ours.optim.lr = 0.125;
  ours.strategy.checkpointing.policy = "full";  // not fingerprinted: not named
  const auto diffs = frugal::fingerprint_differences(saved, ours);
  REQUIRE(diffs.size() == 2);
  CHECK(diffs[0] == fmt::format("model.n_embd: {} in the checkpoint, {} here", saved.model.n_embd,
                                ours.model.n_embd));
  CHECK(diffs[1].rfind("optim.lr: ", 0) == 0);
  CHECK(diffs[1].find(" here") != std::string::npos);
  CHECK(frugal::fingerprint_differences(saved, saved).empty());
  // A key one model type reads and the other does not.
  Config llama = saved;
  llama.model.type = "llama";
  const auto types = frugal::fingerprint_differences(saved, llama);
  INFO(fmt::format("{}", fmt::join(types, "\n")));
  CHECK(std::find(types.begin(), types.end(),
                  "model.type: \"gpt\" in the checkpoint, \"llama\" here") != types.end());
}
