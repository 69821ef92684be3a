// `frugal train` fine-tunes a Hugging Face folder with LoRA: its checkpoints hold the adapters
// (and their optimizer state) only, a resume ends exactly where an uninterrupted run ends, and a
// base folder changed since the checkpoint is refused, naming the file.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "frugal/io/checkpoint.h"
#include "support/cli.h"
#include "support/model_configs.h"

namespace fs = std::filesystem;

namespace lora_cli_test {

using frugal::test::frugal;
using frugal::test::quote;

// The last training loss metrics.jsonl records.
double last_loss(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  double loss = -1;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss") && j.contains("step")) loss = j["loss"].get<double>();
  }
  return loss;
}

TEST_CASE("lora from a Hugging Face folder: adapters-only checkpoints, exact resume, the base checked",
          "[integration][lora][cli]") {
  frugal::test::TempDir dir("frugal-lora-cli");
  const std::string runs = dir.path().string();
  // A base: a tiny Llama trained one step and exported as a transformers folder.
  frugal::test::write_text(
      dir / "base.yaml",
      "run: {name: base, dir: '" + runs + "', seed: 1}\n"
      "model: " +
          frugal::test::transformer_yaml("llama", 2, 2, 16, 16, 64, "intermediate_size: 32") + "\n"
      "data: {micro_batch_size: 2, synthetic_samples: 64}\n"
      "train: {max_steps: 1, progress: none}\n");
  REQUIRE(frugal("train " + quote((dir / "base.yaml").string())).exit_code == 0);
  const fs::path hf = dir / "hf";
  auto e = frugal("export " + quote((dir / "base").string()) + " --format hf -o " + quote(hf.string()));
  INFO(e.err);
  REQUIRE(e.exit_code == 0);

  frugal::test::write_text(
      dir / "ft.yaml",
      "run: {name: ft, dir: '" + runs + "', seed: 2}\n"
      "model: {type: llama, init_from: '" + hf.string() + "', "
      "lora: {rank: 4, alpha: 8, targets: all-linear}}\n"
      "data: {micro_batch_size: 2, synthetic_samples: 64}\n"
      "optim: {lr: 0.01}\n"
      "train: {max_steps: 4, checkpoint_every: 2, log_every: 1, progress: none}\n");
  const std::string ft = "train " + quote((dir / "ft.yaml").string());
  auto whole = frugal(ft + " --set run.name=whole");
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  CHECK_THAT(whole.err + whole.out, Catch::Contains("trainable ("));

  // Adapters only: 7 linear layers x 2 blocks x (A, B).
  const frugal::Checkpoint ckpt = frugal::load_checkpoint(dir / "whole/checkpoints/step_00000004");
  size_t params = 0;
  for (const auto& [name, t] : ckpt.model) {
    INFO(name);
    CHECK(name.find(".lora_") != std::string::npos);
    ++params;
  }
  CHECK(params == 28);
  const auto meta = nlohmann::json::parse(ckpt.meta_json);
  REQUIRE(meta.contains("base"));
  CHECK(meta["base"].contains("model.safetensors"));
  CHECK(meta["base"].contains("config.json"));

  // Stopped at 2 and resumed: the same end.
  REQUIRE(frugal(ft + " --set run.name=parts --set train.max_steps=2").exit_code == 0);
  auto resumed = frugal(ft + " --set run.name=parts --set run.resume=auto");
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(last_loss(dir / "parts") == last_loss(dir / "whole"));

  // The base changed under the run: one byte of its last tensor.
  {
    std::fstream f(hf / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(-1, std::ios::end);
    f.write(&c, 1);
  }
  auto refused = frugal(ft + " --set run.name=parts --set run.resume=auto --set train.max_steps=6");
  CHECK(refused.exit_code == 2);
  CHECK(frugal::test::count_lines(refused.err) == 1);
  CHECK_THAT(refused.err, Catch::Contains("trained adapters on the base in model.init_from") &&
                              Catch::Contains("whose model.safetensors has changed since"));
}

}  // namespace lora_cli_test
