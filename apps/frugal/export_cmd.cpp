#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint_source.h"
#include "commands.h"
#include "frugal/config/load.h"
#include "frugal/distributed/checkpoint_reader.h"
#include "frugal/distributed/sharded_state.h"
#include "frugal/hf/folder.h"
#include "frugal/hf/peft.h"
#include "frugal/io/checkpoint.h"
#include "frugal/io/checkpoint_meta.h"
#include "frugal/io/pt_export.h"
#include "frugal/io/safetensors.h"
#include "frugal/models/finetune.h"
#include "frugal/train/run_model.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::cli {
namespace {

struct ExportArgs {
  std::string source;
  std::string format = "safetensors";
  std::string output;
  bool overwrite = false;
  double max_shard_mb = 5120;  // --format hf
};

// Publishes `fresh` as `out`, replacing the folder there (--overwrite) only once the new one is
// complete.
void replace_folder(const fs::path& fresh, const fs::path& out) {
  if (fresh == out) return;
  std::error_code ec;
  fs::remove_all(out, ec);
  if (!ec) fs::rename(fresh, out, ec);
  if (ec) throw Error(fmt::format("export: cannot replace '{}': {}", out.string(), ec.message()));
}

}  // namespace

void add_export(CLI::App& app, Action& run) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint's weights: pt (torch.load), safetensors, hf (a Hugging Face "
      "folder: config.json, safetensors shards, the tokenizer's files; LoRA adapters merged), "
      "or peft (a LoRA run's adapters as a PEFT adapter folder)");
  cmd->add_option("source", args->source, "Run directory or checkpoint directory")->required();
  cmd->add_option("--format", args->format,
                  "pt | safetensors | hf (a folder transformers' from_pretrained loads) | peft (an "
                  "adapter folder PeftModel.from_pretrained loads)")
      ->check(CLI::IsMember({"pt", "safetensors", "hf", "peft"}));
  cmd->add_option("-o,--output", args->output, "Output file (a folder for --format hf and peft)")
      ->required();
  cmd->add_option("--max-shard-mb", args->max_shard_mb,
                  "--format hf: the largest safetensors shard, in MiB (default 5120)")
      ->check(above(0));
  cmd->add_flag("--overwrite", args->overwrite, "Replace the output if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const fs::path out(args->output);
      if (fs::exists(out) && !args->overwrite) {
        throw Error(fmt::format("export: '{}' already exists (pass --overwrite to replace it)",
                                out.string()));
      }
      const fs::path ckpt_dir = resolve_checkpoint(args->source, "export");
      // Every file checked first, as a resume does: the reader below verifies only the blocks
      // it reads, and a damaged checkpoint is refused whole, naming the file.
      verify_checkpoint(ckpt_dir);
      dist::CheckpointReader reader(ckpt_dir, /*rank=*/0);
      const NamedTensors tensors = weights(ckpt_dir, reader);
      size_t written = tensors.size();
      // An existing folder (--overwrite) is replaced only once the new one is complete.
      fs::path fresh = out;
      if (fs::exists(out)) fresh += ".new";
      if (args->format == "hf") {
        const Config cfg = config_of(ckpt_dir, reader.checkpoint(), args->format);
        const ModelConfig& model = cfg.model;
        // The tokenizer files come along from the folder the run started from.
        const fs::path tokenizer_dir =
            fs::is_directory(model.init_from) ? fs::path(model.init_from) : fs::path();
        // And its bos/eos ids, so that transformers' generate stops where this model does.
        const hf::TokenIds ids = hf::special_token_ids(tokenizer_dir, cfg.data.eot_token);
        if (finetuning(model)) {
          // The checkpoint holds what trained (adapters, unfrozen parameters): the model is
          // rebuilt on its base and written whole, each adapter merged into its layer.
          auto rebuilt = restore_run_model(cfg, tensors, (ckpt_dir / "model.pt").string());
          const NamedTensors merged = merged_model_weights(*rebuilt);
          written = merged.size();
          hf::write_folder(fresh, model, merged,
                           static_cast<int64_t>(args->max_shard_mb * 1024 * 1024), tokenizer_dir,
                           ids);
        } else {
          hf::write_folder(fresh, model, tensors,
                           static_cast<int64_t>(args->max_shard_mb * 1024 * 1024), tokenizer_dir,
                           ids);
        }
        replace_folder(fresh, out);
      } else if (args->format == "peft") {
        const Config cfg = config_of(ckpt_dir, reader.checkpoint(), args->format);
        NamedTensors adapters;
        for (const auto& [name, t] : tensors) {
          if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos) {
            adapters.emplace_back(name, t);
          }
        }
        if (cfg.model.lora.rank == 0 || adapters.empty()) {
          throw Error(fmt::format("export --format peft: {} has no LoRA adapters (its run did not "
                                  "set model.lora); --format hf or safetensors write its weights",
                                  ckpt_dir.string()));
        }
        written = adapters.size();
        hf::write_adapter_folder(fresh, cfg.model, adapters);
        replace_folder(fresh, out);
      } else if (args->format == "pt") {
        io::write_pt(out, tensors);
      } else {
        io::write_safetensors(out, tensors, {{"format", "pt"}, {"source", ckpt_dir.string()}});
      }
      std::cout << fmt::format("wrote {} tensors from {} to {}\n", written,
                               ckpt_dir.string(), out.string());
      return 0;
    };
  });
}

}  // namespace frugal::cli
