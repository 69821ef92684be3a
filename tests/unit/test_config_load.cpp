// Loading: defaults, every key of every section, presets, extends, overrides, example configs.
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/models/model_spec.h"
#include "support/config_files.h"
#include "support/helpers.h"

using frugal::Config;
using frugal::load_config;
using frugal::load_config_string;
using frugal_test::ConfigDir;

TEST_CASE("config: defaults are the struct defaults and valid", "[config][unit]") {
  const Config c = frugal::default_config();
  CHECK(c.run.name == "run");
  CHECK(c.model.type == "gpt");
  CHECK(c.optim.lr == 3e-4);
  CHECK(c.strategy.precision == "fp32");
  CHECK(c.source.empty());
  CHECK_NOTHROW(frugal::validate(c));

  // An empty document is all defaults too.
  const Config empty = load_config_string("", "empty.yaml");
  CHECK(frugal::to_yaml(empty) == frugal::to_yaml(c));
  CHECK(empty.source == "empty.yaml");
}

TEST_CASE("config: every key of every section is read", "[config][unit]") {
  ConfigDir dir;
  const std::string path = dir.write("full.yaml", R"(# every key, none at its default
run:
  name: full
  dir: /tmp/runs
  seed: 18446744073709551615
  resume: auto
  overwrite: true
  threads: 3
model:
  type: gpt
  vocab_size: 512
  block_size: 64
  n_layer: 3
  n_head: 4
  n_embd: 96
  dropout: 0.1
  bias: false
  in_features: 20
  hidden: [8, 16, 32]
  out_features: 5
  in_channels: 3
  image_size: 32
  channels:
    - 4
    - 8
  num_classes: 100
  options: {depth: 7, act: gelu, ratio: 0.5}
data:
  type: tokens
  path: data/shards
  labels_path: labels.idx
  val_path: data/val.bin
  val_fraction: 0.1
  token_format: llmc
  micro_batch_size: 16
  seq_len: 48
  num_workers: 4
  pin_memory: true
  shuffle: false
  synthetic_samples: 100
optim:
  type: adam
  lr: 1.5e-3
  betas: [0.8, 0.95]
  eps: 1e-6
  weight_decay: 0.1
  momentum: 0.5
  nesterov: true
  clip_grad_norm: 1.0
schedule:
  type: cosine
  warmup_steps: 100
  min_lr: 1e-5
  decay_steps: 900
  step_size: 50
  gamma: 0.5
train:
  max_steps: 1e4
  eval_every: 100
  eval_batches: 20
  log_every: 1
  checkpoint_every: 500
  keep_last: 2
  progress: lines
generate:
  tokens: 64
  temperature: 1.2
  top_k: 40
  prompt: "Once upon a time\n"
strategy:
  precision: bf16-mixed
  grad_scaler:
    enabled: false
    init_scale: 128
    growth_factor: 1.5
    backoff_factor: 0.75
    growth_interval: 50
  accumulation: 4
  checkpointing:
    policy: every_k
    k: 3
    targets: [mlp]
memory:
  monitor_every: 20
  empty_cache_every: 200
  budget: 512MiB
  record_history: true
distributed:
  backend: gloo
  timeout_s: 60.5
)");
  const Config c = load_config(path);
  CHECK(c.source == path);
  CHECK(c.run.name == "full");
  CHECK(c.run.dir == "/tmp/runs");
  CHECK(c.run.seed == 18446744073709551615ull);
  CHECK(c.run.resume == "auto");
  CHECK(c.run.overwrite);
  CHECK(c.run.threads == 3);

  CHECK(c.model.type == "gpt");
  CHECK(c.model.size.empty());
  CHECK(c.model.vocab_size == 512);
  CHECK(c.model.block_size == 64);
  CHECK(c.model.n_layer == 3);
  CHECK(c.model.n_head == 4);
  CHECK(c.model.n_embd == 96);
  CHECK(c.model.dropout == 0.1);
  CHECK_FALSE(c.model.bias);
  CHECK(c.model.in_features == 20);
  CHECK(c.model.hidden == std::vector<int64_t>{8, 16, 32});
  CHECK(c.model.out_features == 5);
  CHECK(c.model.in_channels == 3);
  CHECK(c.model.image_size == 32);
  CHECK(c.model.channels == std::vector<int64_t>{4, 8});
  CHECK(c.model.num_classes == 100);
  CHECK(c.model.options ==
        std::map<std::string, std::string>{{"depth", "7"}, {"act", "gelu"}, {"ratio", "0.5"}});

  CHECK(c.data.type == "tokens");
  CHECK(c.data.path == "data/shards");
  CHECK(c.data.labels_path == "labels.idx");
  CHECK(c.data.val_path == "data/val.bin");
  CHECK(c.data.val_fraction == 0.1);
  CHECK(c.data.token_format == "llmc");
  CHECK(c.data.micro_batch_size == 16);
  CHECK(c.data.seq_len == 48);
  CHECK(c.data.num_workers == 4);
  CHECK(c.data.pin_memory);
  CHECK_FALSE(c.data.shuffle);
  CHECK(c.data.synthetic_samples == 100);

  CHECK(c.optim.type == "adam");
  CHECK(c.optim.lr == 1.5e-3);
  CHECK(c.optim.betas == std::array<double, 2>{0.8, 0.95});
  CHECK(c.optim.eps == 1e-6);
  CHECK(c.optim.weight_decay == 0.1);
  CHECK(c.optim.momentum == 0.5);
  CHECK(c.optim.nesterov);
  CHECK(c.optim.clip_grad_norm == 1.0);

  CHECK(c.schedule.type == "cosine");
  CHECK(c.schedule.warmup_steps == 100);
  CHECK(c.schedule.min_lr == 1e-5);
  CHECK(c.schedule.decay_steps == 900);
  CHECK(c.schedule.step_size == 50);
  CHECK(c.schedule.gamma == 0.5);

  CHECK(c.train.max_steps == 10000);  // an integral float is accepted for an integer
  CHECK(c.train.eval_every == 100);
  CHECK(c.train.eval_batches == 20);
  CHECK(c.train.log_every == 1);
  CHECK(c.train.checkpoint_every == 500);
  CHECK(c.train.keep_last == 2);
  CHECK(c.train.progress == "lines");

  CHECK(c.generate.tokens == 64);
  CHECK(c.generate.temperature == 1.2);
  CHECK(c.generate.top_k == 40);
  CHECK(c.generate.prompt == "Once upon a time\n");

  CHECK(c.strategy.precision == "bf16-mixed");
  CHECK_FALSE(c.strategy.grad_scaler.enabled);
  CHECK(c.strategy.grad_scaler.init_scale == 128.0);
  CHECK(c.strategy.grad_scaler.growth_factor == 1.5);
  CHECK(c.strategy.grad_scaler.backoff_factor == 0.75);
  CHECK(c.strategy.grad_scaler.growth_interval == 50);
  CHECK(c.strategy.accumulation == 4);
  CHECK(c.strategy.checkpointing.policy == "every_k");
  CHECK(c.strategy.checkpointing.k == 3);
  CHECK(c.strategy.checkpointing.targets == std::vector<std::string>{"mlp"});

  CHECK(c.memory.monitor_every == 20);
  CHECK(c.memory.empty_cache_every == 200);
  CHECK(c.memory.budget == 536870912);
  CHECK(c.memory.record_history);

  CHECK(c.distributed.backend == "gloo");
  CHECK(c.distributed.timeout_s == 60.5);
}

TEST_CASE("config: scalar spellings", "[config][unit]") {
  const Config c = load_config_string(R"(
run: {name: "123", overwrite: yes, dir: '~'}
optim: {lr: "2e-3", betas: [+0.5, 0.25]}
data: {pin_memory: On, path: }
model: {options: }
)",
                                      "spell.yaml");
  CHECK(c.run.name == "123");  // a quoted number is a string where a string is expected
  CHECK(c.run.overwrite);
  CHECK(c.run.dir == "~");  // quoted: a string, not null
  CHECK(c.optim.lr == 2e-3);
  CHECK(c.optim.betas == std::array<double, 2>{0.5, 0.25});
  CHECK(c.data.pin_memory);
  CHECK(c.data.path.empty());
  CHECK(c.model.options.empty());
}

TEST_CASE("config: GPT presets fill sizes, explicit keys win in any order", "[config][unit]") {
  SECTION("each preset") {
    struct Expect {
      const char* name;
      int64_t n_layer, n_head, n_embd, block_size, vocab_size;
    };
    const Expect table[] = {{"gpt-tiny", 2, 2, 32, 32, 256},
                            {"gpt-mini", 4, 4, 128, 128, 256},
                            {"gpt-small", 6, 6, 384, 256, 256},
                            {"gpt2-124m", 12, 12, 768, 1024, 50304},
                            {"gpt2-350m", 24, 16, 1024, 1024, 50304}};
    for (const Expect& e : table) {
      INFO(e.name);
      const Config c =
          load_config_string(std::string("model: {size: ") + e.name + "}", "preset.yaml");
      CHECK(c.model.size == e.name);
      CHECK(c.model.n_layer == e.n_layer);
      CHECK(c.model.n_head == e.n_head);
      CHECK(c.model.n_embd == e.n_embd);
      CHECK(c.model.block_size == e.block_size);
      CHECK(c.model.vocab_size == e.vocab_size);
    }
    CHECK(frugal::model_preset_names("gpt") ==
          std::vector<std::string>{"gpt-tiny", "gpt-mini", "gpt-small", "gpt2-124m", "gpt2-350m"});
  }
  SECTION("an explicit key before or after size wins") {
    const Config before =
        load_config_string("model:\n  n_layer: 5\n  size: gpt-mini\n", "before.yaml");
    const Config after =
        load_config_string("model:\n  size: gpt-mini\n  n_layer: 5\n", "after.yaml");
    for (const Config* c : {&before, &after}) {
      CHECK(c->model.n_layer == 5);
      CHECK(c->model.n_embd == 128);  // the rest from the preset
    }
  }
  SECTION("--set wins over the preset, and can choose the preset") {
    const Config c = load_config_string("model: {size: gpt-tiny}", "set.yaml",
                                        {"model.block_size=16", "model.size=gpt-mini"});
    CHECK(c.model.size == "gpt-mini");
    CHECK(c.model.n_embd == 128);
    CHECK(c.model.block_size == 16);
  }
  SECTION("a parent's explicit key wins over a child's preset") {
    ConfigDir dir;
    dir.write("parent.yaml", "model: {n_head: 8}\n");
    const Config c = load_config(dir.write("child.yaml",
                                           "extends: parent.yaml\n"
                                           "model: {size: gpt-mini}\n"));
    CHECK(c.model.n_head == 8);
    CHECK(c.model.n_layer == 4);
  }
}

TEST_CASE("config: extends merges parents, relative to each file", "[config][unit]") {
  ConfigDir dir;
  dir.write("base/root.yaml", R"(
run: {name: root, seed: 7}
optim: {type: sgd, lr: 0.1, momentum: 0.9}
model: {options: {a: "1", b: "2"}}
train: {max_steps: 100}
)");
  dir.write("base/mid.yaml", R"(
extends: root.yaml   # relative to base/, not to the working directory
run: {name: mid}
optim: {lr: 0.2}
model: {options: {b: "3"}}
)");
  const std::string leaf = dir.write("exp/leaf.yaml", R"(
extends: ../base/mid.yaml
run: {name: leaf}
train: {log_every: 7}
)");
  const Config c = load_config(leaf);
  CHECK(c.run.name == "leaf");  // the child wins
  CHECK(c.run.seed == 7);       // maps merge: the grandparent's keys remain
  CHECK(c.optim.type == "sgd");
  CHECK(c.optim.lr == 0.2);
  CHECK(c.optim.momentum == 0.9);
  CHECK(c.train.max_steps == 100);
  CHECK(c.train.log_every == 7);
  CHECK(c.model.options == std::map<std::string, std::string>{{"a", "1"}, {"b", "3"}});
  CHECK(c.source == leaf);

  // From a string, extends is relative to the source name's folder.
  const Config s = load_config_string("extends: mid.yaml\nrun: {seed: 9}\n", dir / "base/x.yaml");
  CHECK(s.run.name == "mid");
  CHECK(s.run.seed == 9);
}

TEST_CASE("config: --set overrides numbers, bools, strings, lists and maps", "[config][unit]") {
  const Config c =
      load_config_string("optim: {lr: 0.1}\nrun: {name: a}\n", "o.yaml",
                         {"optim.lr=0.01", "run.overwrite=true", "run.name=b",
                          "optim.betas=[0.9,0.95]", "model.hidden=[]", "model.options={k: v}",
                          "model.options.n=3", " strategy.accumulation = 8", "data.path="});
  CHECK(c.optim.lr == 0.01);
  CHECK(c.run.overwrite);
  CHECK(c.run.name == "b");
  CHECK(c.optim.betas == std::array<double, 2>{0.9, 0.95});
  CHECK(c.model.hidden.empty());
  CHECK(c.model.options == std::map<std::string, std::string>{{"k", "v"}, {"n", "3"}});
  CHECK(c.strategy.accumulation == 8);
  CHECK(c.data.path.empty());

  // The last of two overrides of one key wins; a value may itself contain '='.
  const Config twice =
      load_config_string("", "t.yaml", {"train.max_steps=5", "train.max_steps=6", "run.name=a=b"});
  CHECK(twice.train.max_steps == 6);
  CHECK(twice.run.name == "a=b");
}

TEST_CASE("config: the example configs load", "[config][unit]") {
  const std::string root = (frugal::test::source_dir() / "configs").string() + "/";
  const Config gpt = load_config(root + "tiny-gpt.yaml");
  CHECK(gpt.model.type == "gpt");
  CHECK(gpt.model.size == "gpt-tiny");
  CHECK(gpt.model.n_embd == 32);
  CHECK(gpt.data.type == "synthetic");
  CHECK(gpt.train.max_steps == 20);

  const Config mlp = load_config(root + "tiny-mlp.yaml");
  CHECK(mlp.model.type == "mlp");
  CHECK(mlp.data.type == "synthetic");

  const Config base = load_config(root + "base.yaml");
  const Config child = load_config(root + "extends-example.yaml");
  CHECK(child.run.name != base.run.name);
  CHECK(child.optim.weight_decay == base.optim.weight_decay);  // inherited
  CHECK(child.schedule.type == base.schedule.type);
}
