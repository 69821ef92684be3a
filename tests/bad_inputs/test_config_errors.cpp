// Every kind of config mistake gives one frugal::Error whose what() is exactly
// "file:line:column: message" pointing at the offending key.
#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "support/config_files.h"

using frugal::load_config;
using frugal::load_config_string;
using frugal_test::ConfigDir;
using frugal_test::error_of;

using frugal_test::error_for;

TEST_CASE("config errors: malformed YAML", "[config][bad_input]") {
  CHECK(error_for("optim:\n  lr: [1, 2\ntrain: {}\n") ==
        "c.yaml:3:6: invalid YAML: end of sequence flow not found");
  CHECK(error_for("run:\n  name: x\n seed: 2\n") ==
        "c.yaml:3:2: invalid YAML: end of map not found");
  CHECK(error_for("- a\n- b\n") ==
        "c.yaml:1:1: a config file is a map of sections, got a list of 2");
  CHECK(error_for("just text") ==
        "c.yaml:1:1: a config file is a map of sections, got 'just text'");
}

TEST_CASE("config errors: unknown sections and keys suggest the closest", "[config][bad_input]") {
  CHECK(error_for("optm:\n  lr: 0.1\n") ==
        "c.yaml:1:1: unknown section 'optm' (did you mean 'optim'?)");
  CHECK(error_for("run: {}\noptim:\n  type: sgd\n  lrr: 0.1\n") ==
        "c.yaml:4:3: unknown key 'optim.lrr' (did you mean 'lr'?)");
  CHECK(error_for("schedule: {warmup: 10}\n") ==
        "c.yaml:1:12: unknown key 'schedule.warmup' (did you mean 'warmup_steps'?)");
  // Nothing close: no suggestion.
  CHECK(error_for("model:\n  zzzzzz: 1\n") == "c.yaml:2:3: unknown key 'model.zzzzzz'");
  CHECK(error_for("profiler: {}\n") == "c.yaml:1:1: unknown section 'profiler'");
  CHECK(error_for("optim:\n  lr: 0.1\n  lr: 0.2\n") ==
        "c.yaml:3:3: duplicate key 'optim.lr' (first given at line 2)");
}

TEST_CASE("config errors: wrong types", "[config][bad_input]") {
  CHECK(error_for("optim:\n  lr: fast\n") == "c.yaml:2:3: optim.lr: expected a number, got 'fast'");
  CHECK(error_for("train:\n  max_steps: 1.5\n") ==
        "c.yaml:2:3: train.max_steps: expected an integer, got 1.5");
  CHECK(error_for("train: {max_steps: 99999999999999999999}\n") ==
        "c.yaml:1:9: train.max_steps: 99999999999999999999 is out of range");
  CHECK(error_for("run:\n  seed: -1\n") ==
        "c.yaml:2:3: run.seed: expected a non-negative integer, got -1");
  CHECK(error_for("run:\n  overwrite: maybe\n") ==
        "c.yaml:2:3: run.overwrite: expected true or false, got 'maybe'");
  CHECK(error_for("run:\n  name: [a, b]\n") ==
        "c.yaml:2:3: run.name: expected a string, got a list of 2");
  CHECK(error_for("run:\n  name: {a: b}\n") ==
        "c.yaml:2:3: run.name: expected a string, got a map");
  CHECK(error_for("optim:\n  lr:\n") == "c.yaml:2:3: optim.lr: expected a number, got nothing");
  CHECK(error_for("optim:\n  betas: [0.9]\n") ==
        "c.yaml:2:3: optim.betas: expected a list of 2 numbers, got a list of 1");
  CHECK(error_for("optim:\n  betas: [0.9, x]\n") ==
        "c.yaml:2:16: optim.betas[1]: expected a number, got 'x'");
  CHECK(error_for("model:\n  hidden: 64\n") ==
        "c.yaml:2:3: model.hidden: expected a list of integers, got 64");
  CHECK(error_for("model:\n  hidden:\n    - 64\n    - 1.5\n") ==
        "c.yaml:4:7: model.hidden[1]: expected an integer, got 1.5");
  CHECK(error_for("model:\n  options: [a]\n") ==
        "c.yaml:2:3: model.options: expected a map of name: value, got a list of 1");
  CHECK(error_for("model:\n  options:\n    depth: [1, 2]\n") ==
        "c.yaml:3:5: model.options.depth: expected a single value, got a list of 2");
}

TEST_CASE("config errors: a section that is not a map", "[config][bad_input]") {
  CHECK(error_for("run: {}\noptim: 3\n") ==
        "c.yaml:2:1: section 'optim' must be a map of keys, got 3");
  CHECK(error_for("train: [1]\n") ==
        "c.yaml:1:1: section 'train' must be a map of keys, got a list of 1");
}

TEST_CASE("config errors: missing and unreadable files", "[config][bad_input]") {
  ConfigDir dir;
  const std::string missing = dir / "x.yaml";
  CHECK(error_of([&] { load_config(missing); }) ==
        "cannot read config file '" + missing + "': No such file or directory");
  CHECK(error_of([&] { load_config(dir / ""); }).find("it is a directory") != std::string::npos);

  const std::string child = dir.write("child.yaml", "# child\nextends: nope.yaml\n");
  CHECK(error_of([&] { load_config(child); }) == child + ":2:1: cannot read config file '" +
                                                     (dir / "nope.yaml") +
                                                     "': No such file or directory");
  CHECK(error_for("extends: [a, b]\n") ==
        "c.yaml:1:1: extends: expected a file path, got a list of 2");
}

TEST_CASE("config errors: extends cycles name the chain", "[config][bad_input]") {
  ConfigDir dir;
  const std::string a = dir.write("a.yaml", "extends: b.yaml\n");
  dir.write("b.yaml", "run: {}\nextends: a.yaml\n");
  CHECK(error_of([&] { load_config(a); }) == dir / "b.yaml" + ":2:1: extends cycle: " + a + " -> " +
                                                 (dir / "b.yaml") + " -> " + (dir / "a.yaml"));
  const std::string self = dir.write("self.yaml", "extends: ./self.yaml\n");
  CHECK(error_of([&] { load_config(self); }) ==
        self + ":1:1: extends cycle: " + self + " -> " + (dir / "./self.yaml"));
}

TEST_CASE("config errors: errors in a parent file point into the parent", "[config][bad_input]") {
  ConfigDir dir;
  const std::string parent = dir.write("parent.yaml", "optim:\n  lr: 0\n");
  const std::string child = dir.write("child.yaml", "extends: parent.yaml\nrun: {name: c}\n");
  CHECK(error_of([&] { load_config(child); }) == parent + ":2:3: optim.lr: must be > 0, got 0");
  // Overridden in the child: the child's position.
  const std::string fixed = dir.write("fixed.yaml", "extends: parent.yaml\noptim: {lr: -1}\n");
  CHECK(error_of([&] { load_config(fixed); }) == fixed + ":2:9: optim.lr: must be > 0, got -1");
}

TEST_CASE("config errors: out-of-range and cross-field values", "[config][bad_input]") {
  CHECK(error_for("optim:\n  lr: 0\n") == "c.yaml:2:3: optim.lr: must be > 0, got 0");
  CHECK(error_for("optim:\n  lr: .nan\n") == "c.yaml:2:3: optim.lr: must be > 0, got nan");
  CHECK(error_for("optim:\n  betas: [0.9, 1.0]\n") ==
        "c.yaml:2:3: optim.betas: must be in [0, 1), got 1");
  CHECK(error_for("data: {micro_batch_size: 0}\n") ==
        "c.yaml:1:8: data.micro_batch_size: must be >= 1, got 0");
  CHECK(error_for("data: {val_fraction: 1}\n") ==
        "c.yaml:1:8: data.val_fraction: must be in [0, 1), got 1");
  CHECK(error_for("strategy:\n  accumulation: 0\n") ==
        "c.yaml:2:3: strategy.accumulation: must be >= 1, got 0");
  CHECK(
      error_for("model:\n  n_head: 3\n  n_embd: 128\n") ==
      "c.yaml:3:3: model.n_embd: must be a multiple of model.n_head (128 is not a multiple of 3)");
  // The preset's values are located at model.size.
  CHECK(error_for("model:\n  size: gpt-tiny\ndata:\n  seq_len: 64\n") ==
        "c.yaml:4:3: data.seq_len: must be <= model.block_size (32), got 64");
  CHECK(error_for("model:\n  size: gpt-tiny\n  n_head: 3\n") ==
        "c.yaml:2:3: model.n_embd: must be a multiple of model.n_head (32 is not a multiple of 3)");
  // data.path was never written: the error points at the key that requires it.
  CHECK(error_for("data:\n  type: tokens\n") ==
        "c.yaml:2:3: data.path: is required when data.type is 'tokens'");
  CHECK(error_for("optim: {lr: 0.1}\nschedule: {min_lr: 0.5}\n") ==
        "c.yaml:2:12: schedule.min_lr: must be <= optim.lr (0.1), got 0.5");
  CHECK(error_for("optim: {type: sgd, nesterov: true}\n") ==
        "c.yaml:1:20: optim.nesterov: needs optim.momentum > 0");
  // Low-bit optimizers: the block size, and adafactor's need for whole matrices.
  CHECK(error_for("optim: {type: adamw8bit, quant_block: 100}\n") ==
        "c.yaml:1:26: optim.quant_block: must be a power of two in [64, 4096], got 100");
  CHECK(error_for("optim: {type: adafactor}\nstrategy: {sharding: zero2}\n") ==
        "c.yaml:1:9: optim.type: adafactor cannot run with strategy.sharding.mode zero2: its flat "
        "shards have no rows and columns to factor (use adamw8bit, or sharding none or ddp)");
  CHECK(error_for("optim: {beta1: 0.9}\n") ==
        "c.yaml:1:9: optim.beta1: is adafactor's first moment (got it with optim.type adamw; "
        "adam's and adamw's are optim.betas)");
  CHECK(error_for("optim: {type: adafactor, beta1: 1.5}\n") ==
        "c.yaml:1:26: optim.beta1: must be in [0, 1), got 1.5");
  CHECK(error_for("run: {resume: ''}\n") ==
        "c.yaml:1:7: run.resume: must be never, auto or a checkpoint path");
  // The optimizer step in backward cannot wait for every gradient.
  CHECK(error_for("optim: {clip_grad_norm: 1.0, in_backward: true}\n") ==
        "c.yaml:1:30: optim.in_backward: cannot clip: clipping needs every gradient before the "
        "first update (set optim.clip_grad_norm: 0)");
  CHECK(error_for("optim: {in_backward: true}\nstrategy: {precision: fp16-mixed}\n") ==
        "c.yaml:1:9: optim.in_backward: cannot run with fp16-mixed: the loss scaler must see "
        "every gradient before the first update (use bf16-mixed)");
  // Document packing needs position ids, which the GPT does not take.
  CHECK(error_for("data: {type: tokens, path: t.bin, eot_token: 3}\n") ==
        "c.yaml:1:35: data.eot_token: needs a model that takes position ids (model.type gpt does "
        "not)");
  CHECK(error_for("model: {type: llama, vocab_size: 64}\ndata: {type: tokens, path: t.bin, eot_token: 64}\n") ==
        "c.yaml:2:35: data.eot_token: must be < model.vocab_size (64), got 64");
}

TEST_CASE("config errors: names outside their closed sets", "[config][bad_input]") {
  CHECK(error_for("optim:\n  type: adamx\n") ==
        "c.yaml:2:3: optim.type: unknown value 'adamx' (expected one of: adamw, adam, sgd, adamw8bit, "
        "adafactor) "
        "(did you mean 'adamw'?)");
  CHECK(error_for("schedule: {type: cosin}\n") ==
        "c.yaml:1:12: schedule.type: unknown value 'cosin' (expected one of: constant, cosine, "
        "linear, step) (did you mean 'cosine'?)");
  CHECK(error_for("data: {type: txt, path: a}\n") ==
        "c.yaml:1:8: data.type: unknown value 'txt' (expected one of: tokens, idx, synthetic, "
        "text, chat, tokenized) (did you mean 'text'?)");
  CHECK(error_for("data: {token_format: gpt}\n") ==
        "c.yaml:1:8: data.token_format: unknown value 'gpt' (expected one of: auto, nanogpt, "
        "llmc)");
  CHECK(error_for("train: {progress: bars}\n") ==
        "c.yaml:1:9: train.progress: unknown value 'bars' (expected one of: auto, bar, lines, "
        "none) (did you mean 'bar'?)");
  CHECK(error_for("distributed: {backend: mpi}\n") ==
        "c.yaml:1:15: distributed.backend: unknown value 'mpi' (expected one of: auto, nccl, "
        "gloo)");
  CHECK(error_for("strategy: {precision: fp33}\n") ==
        "c.yaml:1:12: strategy.precision: unknown value 'fp33' (expected one of: fp32, "
        "bf16-mixed, fp16-mixed, auto) (did you mean 'fp32'?)");
  CHECK(error_for("model:\n  size: gpt2-125m\n") ==
        "c.yaml:2:3: model.size: unknown preset 'gpt2-125m' (did you mean 'gpt2-124m'?) (known: "
        "gpt-tiny, gpt-mini, gpt-small, gpt2-124m, gpt2-350m, smollm2-135m, smollm2-360m, "
        "smollm2-1.7b, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-0.5b)");
  CHECK(error_for("run: {device: gpu}\n") ==
        "c.yaml:1:7: run.device: unknown device 'gpu' (expected auto, cpu, cuda or cuda:N)");
  CHECK_NOTHROW(load_config_string("run: {device: 'cuda:1'}\n", "c.yaml"));
  CHECK(error_for("model: {kernels: flash}\n") ==
        "c.yaml:1:9: model.kernels: unknown value 'flash' (expected one of: auto, aten, frugal)");
  CHECK(error_for("model: {kernels: frugal, dropout: 0.1}\n") ==
        "c.yaml:1:9: model.kernels: frugal's attention has no dropout (model.dropout is 0.1): use "
        "auto or aten, or model.dropout: 0");
  // model.type is open: user-registered models have their own names.
  CHECK_NOTHROW(load_config_string("model: {type: my-resnet}\n", "c.yaml"));
}

TEST_CASE("config errors: overrides", "[config][bad_input]") {
  CHECK(error_for("", {"optim.lrr=0.1"}) ==
        "--set optim.lrr: unknown key 'optim.lrr' (did you mean 'lr'?)");
  CHECK(error_for("", {"optm.lr=0.1"}) ==
        "--set optm.lr: unknown section 'optm' (did you mean 'optim'?)");
  CHECK(error_for("", {"optim.lr"}) ==
        "--set optim.lr: expected section.key=value (e.g. --set optim.lr=1e-3)");
  CHECK(error_for("", {"optim..lr=1"}) ==
        "--set optim..lr: expected section.key=value (e.g. --set optim.lr=1e-3)");
  CHECK(error_for("", {"=1"}) == "--set : expected section.key=value (e.g. --set optim.lr=1e-3)");
  CHECK(error_for("", {"optim.lr=fast"}) ==
        "--set optim.lr: optim.lr: expected a number, got 'fast'");
  CHECK(error_for("optim: {lr: 0.1}\n", {"optim.lr=0"}) ==
        "--set optim.lr: optim.lr: must be > 0, got 0");
  CHECK(error_for("", {"optim.betas=[0.9, 0.95"})
            .find("--set optim.betas: cannot read the value "
                  "'[0.9, 0.95' as YAML: ") == 0);
  CHECK(error_for("", {"optim=3"}) == "--set optim: section 'optim' must be a map of keys, got 3");
}

TEST_CASE("config errors: validate() on a config built in code", "[config][bad_input]") {
  frugal::Config c;
  c.optim.lr = -1;
  CHECK(error_of([&] { frugal::validate(c); }) == "<config>: optim.lr: must be > 0, got -1");
  c.source = "from.yaml";
  CHECK(error_of([&] { frugal::validate(c); }) == "from.yaml: optim.lr: must be > 0, got -1");
  c = frugal::Config{};
  c.model.size = "gpt-huge";
  CHECK(error_of([&] { frugal::validate(c); }).find("<config>: model.size: unknown value") == 0);
}

TEST_CASE("config errors: the tensorboard keys", "[config][bad_input][tensorboard]") {
  CHECK(error_for("train: {tensorboard: maybe}\n") ==
        "c.yaml:1:9: train.tensorboard: expected true or false, got 'maybe'");
  CHECK(error_for("train: {tensorboard_ranks: rank0}\n") ==
        "c.yaml:1:9: train.tensorboard_ranks: unknown value 'rank0' (expected one of: main, all)");
  CHECK(error_for("train: {tensorboard_histograms_every: -1}\n") ==
        "c.yaml:1:9: train.tensorboard_histograms_every: must be >= 0, got -1");
  CHECK(error_for("", {"train.tensorboard_histograms_every=often"}) ==
        "--set train.tensorboard_histograms_every: train.tensorboard_histograms_every: expected "
        "an integer, got 'often'");
  const frugal::Config c =
      load_config_string("train: {tensorboard: true, tensorboard_ranks: all}\n", "c.yaml");
  CHECK(c.train.tensorboard);
  CHECK(c.train.tensorboard_ranks == "all");
  CHECK(c.train.tensorboard_histograms_every == 0);
}
