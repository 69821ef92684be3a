// A step that runs out of memory (on the CPU: past memory.budget, which the tracking allocator
// refuses as CUDA refuses a full device) stops the run cleanly: a non-zero exit, the memory
// summary, advice computed from the config, and the last checkpoint kept intact and resumable.
#include <catch2/catch.hpp>

#include "frugal/memory/oom_advice.h"
#include "support/cli.h"
#include "support/model_configs.h"

using namespace frugal;

TEST_CASE("out of memory in a step: summary, advice, and the checkpoint kept",
          "[integration][memory]") {
  test::TempDir dir;
  const auto cfg = dir / "oom.yaml";
  test::write_text(cfg, "run: {dir: '" + dir.path().string() + "', name: r}\n"
                        "model: " + test::transformer_yaml("gpt", 2, 2, 32, 32, 64) + "\n"
                        "data: {type: synthetic, micro_batch_size: 8, synthetic_samples: 256, num_workers: 0}\n"
                        "train: {max_steps: 2, log_every: 1, eval_batches: 0, progress: none}\n"
                        "generate: {tokens: 0}\n");
  test::CommandResult first = test::frugal("train " + test::quote(cfg.string()));
  REQUIRE(first.exit_code == 0);
  const auto ckpt = dir / "r" / "checkpoints" / "step_00000002";
  REQUIRE(std::filesystem::exists(ckpt / "manifest.json"));

  // The same run, resumed with room for the model but not for a step's activations.
  test::CommandResult oom = test::frugal("train " + test::quote(cfg.string()) +
                                         " --set run.resume=auto --set train.max_steps=4"
                                         " --set memory.budget=1MiB");
  INFO(oom.out << oom.err);
  CHECK(oom.exit_code != 0);
  const std::string text = oom.out + oom.err;
  CHECK_THAT(text, Catch::Contains("out of memory in step 3 on cpu: CPU memory budget exceeded"));
  CHECK_THAT(text, Catch::Contains("allocated (tensors)"));
  // Owners where known: the largest parameters by name (an MLP matrix: 32 x 128 fp32).
  CHECK_THAT(text, Catch::Contains("largest parameters") &&
                       Catch::Contains("blocks.1.mlp.proj.weight 16.0 KiB"));
  CHECK_THAT(text, Catch::Contains("bf16-mixed would save ~"));
  CHECK_THAT(text, Catch::Contains("checkpointing every block would save ~"));
  CHECK_THAT(text, Catch::Contains("data.micro_batch_size: 4, strategy.accumulation: 2"));
  CHECK_THAT(text, Catch::Contains("the last checkpoint is kept as it was: " + ckpt.string()));
  // Nothing newer was written, and the kept checkpoint still verifies and resumes.
  CHECK_FALSE(std::filesystem::exists(dir / "r" / "checkpoints" / "step_00000003"));
  test::CommandResult resumed = test::frugal("train " + test::quote(cfg.string()) +
                                             " --set run.resume=auto --set train.max_steps=3");
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("out-of-memory advice follows the config", "[unit][memory]") {
  Config cfg;
  memory::OomFigures f;
  f.state_bytes = 16 << 20;
  f.peak_bytes = 80 << 20;  // 64 MiB of activations
  auto advice = memory::oom_advice(cfg, f);
  auto has = [&](const std::string& s) {
    for (const auto& a : advice) {
      if (a.find(s) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(has("bf16-mixed would save ~32.0 MiB"));
  CHECK(has("checkpointing every block would save ~48.0 MiB"));
  CHECK(has("zero3 over 4 ranks would hold ~4.0 MiB"));
  CHECK(has("offloading the optimizer would move ~8.0 MiB"));
  // The options past PyTorch's floor, cheapest first: the default model is a GPT with no
  // chunked loss and no clipping.
  CHECK(has("the chunked loss would save up to ~"));
  CHECK(has("stepping in backward would free ~4.0 MiB of gradients"));
  CHECK(has("8-bit AdamW would save ~6.0 MiB of optimizer state"));
  auto position = [&](const std::string& s) {
    for (size_t i = 0; i < advice.size(); ++i) {
      if (advice[i].find(s) != std::string::npos) return i;
    }
    return advice.size();
  };
  CHECK(position("chunked loss") < position("bf16-mixed"));
  CHECK(position("stepping in backward") < position("checkpointing every block"));
  CHECK(position("checkpointing every block") < position("zero3 over"));
  // What is already on is not advised again; CUDA fragmentation is.
  cfg.strategy.precision = "bf16-mixed";
  cfg.strategy.checkpointing.policy = "full";
  cfg.strategy.sharding.mode = "zero3";
  cfg.strategy.offload.optimizer = true;
  f.reserved_bytes = 200 << 20;
  f.allocated_bytes = 100 << 20;
  advice = memory::oom_advice(cfg, f);
  CHECK_FALSE(has("bf16-mixed"));
  CHECK_FALSE(has("checkpointing every block"));
  CHECK_FALSE(has("zero3 over"));
  CHECK_FALSE(has("offloading"));
  CHECK(has("activation offload would move the checkpointed blocks' inputs"));
  CHECK(has("fragmentation: 100.0 MiB reserved but unused"));
  cfg.model.loss_chunk_tokens = 256;
  cfg.optim.type = "adamw8bit";
  cfg.optim.clip_grad_norm = 1.0;
  cfg.strategy.offload.activations = true;
  advice = memory::oom_advice(cfg, f);
  CHECK_FALSE(has("chunked loss"));
  CHECK_FALSE(has("stepping in backward"));
  CHECK_FALSE(has("8-bit AdamW"));
  CHECK_FALSE(has("activation offload"));
}
