// `frugal train` with strategy.offload.optimizer (ram, and nvme: the state in files): the run,
// its whole checkpoint and a resume from it end with the same parameters as the plain run, bit
// for bit; so does a run with the state on disk resumed from its own checkpoint.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

#include "support/model_configs.h"
#include "support/weights.h"

using namespace frugal::test;

TEST_CASE("frugal train with an offloaded optimizer equals the plain run, resumed or not",
          "[integration][offload]") {
  TempDir dir;
  const auto cfg = dir / "o.yaml";
  write_text(cfg, "run: {dir: '" + dir.path().string() + "', seed: 2}\n"
                  "model: " + transformer_yaml("gpt", 2, 2, 32, 16, 64, "dropout: 0.1") + "\n"
                  "data: {type: synthetic, micro_batch_size: 4, synthetic_samples: 128, num_workers: 0}\n"
                  "optim: {type: adamw, lr: 0.003, weight_decay: 0.1, clip_grad_norm: 0.5}\n"
                  "train: {max_steps: 6, log_every: 1, eval_batches: 0, progress: none, "
                  "checkpoint_every: 3}\n"
                  "strategy: {accumulation: 2}\n"
                  "generate: {tokens: 0}\n");
  auto run = [&](const std::string& args) {
    CommandResult r = frugal::test::frugal("train " + quote(cfg.string()) + " " + args);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  };
  run("--set run.name=plain");
  run("--set run.name=offload --set strategy.offload.optimizer=true");
  run("--set run.name=resumed --set strategy.offload.optimizer=true --set run.resume=" +
      quote((dir / "offload" / "checkpoints" / "step_00000003").string()));
  std::filesystem::create_directory(dir / "nvme_state");
  const std::string nvme = " --set strategy.offload.optimizer=nvme --set strategy.offload.buffer_mb=0.05"
                           " --set strategy.offload.nvme_path=" + quote((dir / "nvme_state").string());
  run("--set run.name=nvme" + nvme);
  run("--set run.name=nvme_resumed" + nvme + " --set run.resume=" +
      quote((dir / "nvme" / "checkpoints" / "step_00000003").string()));
  const auto plain = exported_weights(dir / "plain", dir / "plain.safetensors");
  for (const char* name : {"offload", "resumed", "nvme", "nvme_resumed"}) {
    INFO(name);
    const auto other = exported_weights(dir / name, dir / (std::string(name) + ".safetensors"));
    REQUIRE(other.size() == plain.size());
    for (const auto& [k, v] : plain) CHECK(at::equal(v, other.at(k)));
  }
}

TEST_CASE("frugal train with the optimizer state on a disk that fills: one line, the last "
          "checkpoint intact",
          "[integration][offload][nvme][reliability]") {
  TempDir dir;
  std::filesystem::create_directory(dir / "nvme");
  const std::string args =
      "train --set run.dir=" + quote(dir.path().string()) + " " +
      transformer_sets("gpt", 2, 2, 32, 16, 64) +
      " --set data.type=synthetic --set data.synthetic_samples=128 --set data.micro_batch_size=4"
      " --set data.num_workers=0 --set train.max_steps=8 --set train.checkpoint_every=2"
      " --set train.eval_batches=0 --set train.progress=none --set generate.tokens=0"
      " --set strategy.offload.optimizer=nvme --set strategy.offload.buffer_mb=0.05"
      " --set strategy.offload.nvme_path=" + quote((dir / "nvme").string());
  CommandResult reference = frugal::test::frugal(args + " --set run.name=reference");
  REQUIRE(reference.exit_code == 0);
  // The state file is ~0.4 MiB and rewritten each step: the disk fills during step 4 or so.
  CommandResult full = run_command("FRUGAL_FAULT_DIRECT_ENOSPC_AFTER_BYTES=2000000 " +
                                   quote(frugal_binary()) + " " + args + " --set run.name=full");
  INFO(full.out << full.err);
  CHECK(full.exit_code != 0);
  CHECK_THAT(full.err, Catch::Contains("No space left on device") &&
                           Catch::Contains("frugal-optimizer-state"));
  const auto saved = std::filesystem::directory_iterator(dir / "full" / "checkpoints");
  int checkpoints = 0;
  for (const auto& e : saved) checkpoints += e.path().filename().string().rfind("step_", 0) == 0;
  CHECK(checkpoints >= 1);
  // Resumed from the last checkpoint without the fault: the uninterrupted run's parameters.
  CommandResult resumed =
      frugal::test::frugal(args + " --set run.name=full --set run.resume=auto");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const auto want = exported_weights(dir / "reference", dir / "reference.safetensors");
  const auto got = exported_weights(dir / "full", dir / "full.safetensors");
  REQUIRE(got.size() == want.size());
  for (const auto& [k, v] : want) CHECK(at::equal(v, got.at(k)));
  CHECK(std::filesystem::is_empty(dir / "nvme"));
}
