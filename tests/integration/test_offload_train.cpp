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
