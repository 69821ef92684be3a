#include "frugal/train/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frugal/config/config.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/pt_export.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/finetune.h"
#include "frugal/train/checkpoint_source.h"
#include "frugal/train/run_model.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

using io::NamedTensors;

// Publishes `fresh` as `out`, replacing the folder there (overwrite) only once the new one is
// complete.
void replace_folder(const fs::path& fresh, const fs::path& out) {
  if (fresh == out) return;
  std::error_code ec;
  fs::remove_all(out, ec);
  if (!ec) fs::rename(fresh, out, ec);
  if (ec) throw Error(fmt::format("export: cannot replace '{}': {}", out.string(), ec.message()));
}

// A Hugging Face folder of the whole model; returns the number of tensors written.
size_t write_hf(const fs::path& dir, dist::CheckpointReader& reader,
                const io::PendingTensors& tensors, const ExportOptions& o, const fs::path& fresh) {
  const Config cfg = checkpoint_config(dir, reader.checkpoint(), o.format);
  const ModelConfig& model = cfg.model;
  // The tokenizer files come along from the folder the run started from.
  const fs::path tokenizer_dir =
      fs::is_directory(model.init_from) ? fs::path(model.init_from) : fs::path();
  // And its bos/eos ids, so that transformers' generate stops where this model does.
  const hf::TokenIds ids = hf::special_token_ids(tokenizer_dir, cfg.data.eot_token);
  if (!finetuning(model)) {
    hf::write_folder(fresh, model, tensors, o.max_shard_bytes, tokenizer_dir, ids);
    return tensors.size();
  }
  // The checkpoint holds what trained (adapters, unfrozen parameters): the model is rebuilt on
  // its base and written whole, each adapter merged into its layer.
  // (The base is loaded whole here: merging needs the model.)
  auto rebuilt = restore_run_model(cfg, io::read_all(tensors, dir.string()), (dir / "model.pt").string());
  const NamedTensors merged = merged_model_weights(*rebuilt);
  hf::write_folder(fresh, model, merged, o.max_shard_bytes, tokenizer_dir, ids);
  return merged.size();
}

// A PEFT adapter folder of the run's LoRA adapters; returns the number of tensors written.
size_t write_peft(const fs::path& dir, dist::CheckpointReader& reader,
                  const io::PendingTensors& tensors, const ExportOptions& o, const fs::path& fresh) {
  const Config cfg = checkpoint_config(dir, reader.checkpoint(), o.format);
  io::PendingTensors lora;
  for (const io::PendingTensor& p : tensors) {
    if (p.name.find(".lora_A.") != std::string::npos || p.name.find(".lora_B.") != std::string::npos) {
      lora.push_back(p);
    }
  }
  const NamedTensors adapters = io::read_all(lora, dir.string());
  if (cfg.model.lora.rank == 0 || adapters.empty()) {
    throw Error(
        fmt::format("export --format peft: {} has no LoRA adapters (its run did not set "
                    "model.lora); --format hf or safetensors write its weights",
                    dir.string()));
  }
  hf::write_adapter_folder(fresh, cfg.model, adapters);
  return adapters.size();
}

}  // namespace

const std::vector<std::string>& export_formats() {
  static const std::vector<std::string> formats{"pt", "safetensors", "hf", "peft"};
  return formats;
}

ExportResult export_checkpoint(const ExportOptions& o) {
  const auto& formats = export_formats();
  if (std::find(formats.begin(), formats.end(), o.format) == formats.end()) {
    throw Error(fmt::format("export: unknown format '{}' (expected one of: {})", o.format,
                            fmt::join(formats, ", ")));
  }
  if (fs::exists(o.output) && !o.overwrite) {
    throw Error(fmt::format("export: '{}' already exists (pass --overwrite to replace it)",
                            o.output.string()));
  }
  ExportResult result;
  result.checkpoint = resolve_checkpoint(o.source, "export");
  const fs::path& dir = result.checkpoint;
  // Every file checked first, as a resume does: the reader below verifies only the blocks it
  // reads, and a damaged checkpoint is refused whole, naming the file.
  verify_checkpoint(dir);
  dist::CheckpointReader reader(dir, /*rank=*/0);
  // Each tensor read when its turn to be written comes, and let go: the export holds the
  // largest tensor and the reader's buffers, not the model.
  const io::PendingTensors tensors = reader.weights();
  if (o.format == "pt") {
    io::write_pt(o.output, tensors);
    result.tensors = tensors.size();
    return result;
  }
  if (o.format == "safetensors") {
    io::write_safetensors(o.output, tensors, {{"format", "pt"}, {"source", dir.string()}});
    result.tensors = tensors.size();
    return result;
  }
  // A folder: an existing one (overwrite) is replaced only once the new one is complete.
  fs::path fresh = o.output;
  if (fs::exists(o.output)) fresh += ".new";
  result.tensors = o.format == "hf" ? write_hf(dir, reader, tensors, o, fresh)
                                    : write_peft(dir, reader, tensors, o, fresh);
  replace_folder(fresh, o.output);
  return result;
}

}  // namespace frugal
