// frugal::export_checkpoint, the library half of `frugal export`: the checkpoint's weights
// written whole, an existing output refused unless overwrite, a folder replaced only by a
// complete one, a PEFT export of a run without adapters refused before anything is written, and
// every format streamed: the tensor memory an export allocates is about its largest tensor,
// not the model (the CPU tracking allocator's peak).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "frugal/config/load.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/io/safetensors.h"
#include "frugal/memory/cpu_tracking.h"
#include "frugal/memory/stats.h"
#include "frugal/train/checkpoint_source.h"
#include "frugal/train/export.h"
#include "frugal/train/trainer.h"
#include "frugal/util/error.h"
#include "support/helpers.h"
#include "support/model_configs.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace test_export {

// A GPT run of 2 steps with its checkpoint (by default 1 layer of width 16); returns the run
// directory.
fs::path trained_run(const fs::path& runs, int64_t n_layer = 1, int64_t n_embd = 16) {
  const std::string yaml = fmt::format(R"(
run: {{name: r, dir: '{}', seed: 3}}
model: {}
data: {{type: synthetic, micro_batch_size: 2, synthetic_samples: 16}}
train: {{max_steps: 2, checkpoint_every: 2, eval_batches: 0, progress: none}}
)",
                                       runs.string(),
                                       test::transformer_yaml("gpt", n_layer, 2, n_embd, 8, 32));
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

TEST_CASE("export_checkpoint streams: one tensor at a time in every format", "[unit][export]") {
  test::TempDir dir("frugal-export");
  // 8 layers of width 64: the model is many times its largest tensor (an MLP weight).
  const fs::path run = trained_run(dir.path(), 8, 64);
  const fs::path ckpt = resolve_checkpoint(run, "export");
  int64_t model_bytes = 0, largest = 0;
  {
    dist::CheckpointReader reader(ckpt, 0);
    for (const auto& [name, t] : checkpoint_weights(ckpt, reader)) {
      model_bytes += static_cast<int64_t>(t.nbytes());
      largest = std::max(largest, static_cast<int64_t>(t.nbytes()));
    }
  }
  REQUIRE(model_bytes > 20 * largest);
  memory::install_cpu_tracking();  // the trainer installed it already; idempotent
  const c10::Device cpu(c10::kCPU);
  for (const std::string format : {"pt", "safetensors", "hf"}) {
    INFO(format);
    ExportOptions o;
    o.source = run;
    o.format = format;
    o.output = dir.path() / ("out-" + format);
    const int64_t before = memory::snapshot(cpu).allocated;
    memory::reset_peaks(cpu);
    export_checkpoint(o);
    const int64_t peak = memory::snapshot(cpu).allocated_peak - before;
    // The value read and, for hf, its transposed copy (GPT-2's Conv1D layout) and the small
    // ones beside: at most three of the largest (and 16 KiB of small tensors: meta, index).
    CHECK(peak <= (format == "hf" ? 3 : 1) * largest + 16384);
    CHECK(peak < model_bytes / 10);
  }
  // What was streamed is what the checkpoint holds.
  dist::CheckpointReader reader(ckpt, 0);
  const io::NamedTensors saved = checkpoint_weights(ckpt, reader);
  const io::NamedTensors back = io::read_safetensors(dir.path() / "out-safetensors");
  REQUIRE(back.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) CHECK(at::equal(back[i].second, saved[i].second));
}
