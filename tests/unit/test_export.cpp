// frugal::export_checkpoint, the library half of `frugal export`: the checkpoint's weights
// written whole, an existing output refused unless overwrite, a folder replaced only by a
// complete one, and a PEFT export of a run without adapters refused before anything is written.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/io/safetensors.h"
#include "frugal/train/checkpoint_source.h"
#include "frugal/train/export.h"
#include "frugal/train/trainer.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace test_export {

// A GPT run of 2 steps with its checkpoint; returns the run directory.
fs::path trained_run(const fs::path& runs) {
  const std::string yaml = fmt::format(R"(
run: {{name: r, dir: '{}', seed: 3}}
model: {}
data: {{type: synthetic, micro_batch_size: 2, synthetic_samples: 16}}
train: {{max_steps: 2, checkpoint_every: 2, eval_batches: 0, progress: none}}
)",
                                       runs.string(),
                                       test::transformer_yaml("gpt", 1, 2, 16, 8, 32));
  Trainer(load_config_string(yaml, "<export test>")).run();
  return runs / "r";
}

}  // namespace test_export

using namespace test_export;

TEST_CASE("export_checkpoint writes the checkpoint's weights and never an unasked overwrite",
          "[unit][export]") {
  test::TempDir dir("frugal-export");
  const fs::path run = trained_run(dir.path());
  const fs::path ckpt = resolve_checkpoint(run, "export");
  dist::CheckpointReader reader(ckpt, 0);
  const io::NamedTensors saved = checkpoint_weights(ckpt, reader);
  REQUIRE(saved.size() > 4);

  ExportOptions o;
  o.source = run;
  o.output = dir.path() / "w.safetensors";
  const ExportResult r = export_checkpoint(o);
  CHECK(r.checkpoint == ckpt);
  CHECK(r.tensors == saved.size());
  const io::NamedTensors back = io::read_safetensors(o.output);
  REQUIRE(back.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    CHECK(back[i].first == saved[i].first);
    CHECK(at::equal(back[i].second, saved[i].second));
  }

  // An existing output is kept unless overwrite is asked for.
  test::write_text(o.output, "mine");
  CHECK_THROWS_WITH(export_checkpoint(o),
                    Catch::Contains("already exists") && Catch::Contains("--overwrite"));
  CHECK(test::read_text(o.output) == "mine");
  o.overwrite = true;
  export_checkpoint(o);
  CHECK(io::read_safetensors(o.output).size() == saved.size());

  o.format = "onnx";
  CHECK_THROWS_WITH(export_checkpoint(o),
                    Catch::Contains("unknown format 'onnx'") && Catch::Contains("peft"));
}

TEST_CASE("export_checkpoint replaces a folder only with a complete one", "[unit][export]") {
  test::TempDir dir("frugal-export");
  const fs::path run = trained_run(dir.path());
  ExportOptions o;
  o.source = run;
  o.format = "hf";
  o.output = dir.path() / "hf";
  fs::create_directories(o.output);
  test::write_text(o.output / "old.txt", "old");

  // A PEFT export of a run without LoRA fails before writing: the old folder stays as it was.
  o.format = "peft";
  o.overwrite = true;
  CHECK_THROWS_WITH(export_checkpoint(o), Catch::Contains("has no LoRA adapters"));
  CHECK(test::read_text(o.output / "old.txt") == "old");

  // A Hugging Face export replaces it whole, and leaves no staging folder beside it.
  o.format = "hf";
  const ExportResult r = export_checkpoint(o);
  CHECK(r.tensors > 4);
  CHECK_FALSE(fs::exists(o.output / "old.txt"));
  CHECK(fs::exists(o.output / "config.json"));
  CHECK(fs::exists(o.output / "model.safetensors"));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 2);  // the run r and hf

  // A source with no checkpoint is named.
  o.source = dir.path() / "hf";
  CHECK_THROWS_WITH(export_checkpoint(o),
                    Catch::Contains("neither a checkpoint nor a run directory"));
}
