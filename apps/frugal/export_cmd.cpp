#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "frugal/train/export.h"

namespace frugal::cli {
namespace {

struct ExportArgs {
  ExportOptions options;
  double max_shard_mb = 5120;  // --format hf
};

}  // namespace

void add_export(CLI::App& app, Action& run) {
  auto args = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint's weights: pt (torch.load), safetensors, hf (a Hugging Face "
      "folder: config.json, safetensors shards, the tokenizer's files; LoRA adapters merged), "
      "or peft (a LoRA run's adapters as a PEFT adapter folder)");
  cmd->add_option("source", args->options.source, "Run directory or checkpoint directory")
      ->required();
  cmd->add_option("--format", args->options.format,
                  "pt | safetensors | hf (a folder transformers' from_pretrained loads) | peft (an "
                  "adapter folder PeftModel.from_pretrained loads)")
      ->check(CLI::IsMember(export_formats()));
  cmd->add_option("-o,--output", args->options.output,
                  "Output file (a folder for --format hf and peft)")
      ->required();
  cmd->add_option("--max-shard-mb", args->max_shard_mb,
                  "--format hf: the largest safetensors shard, in MiB (default 5120)")
      ->check(above(0));
  cmd->add_flag("--overwrite", args->options.overwrite, "Replace the output if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      ExportOptions o = args->options;
      o.max_shard_bytes = static_cast<int64_t>(args->max_shard_mb * 1024 * 1024);
      const ExportResult r = export_checkpoint(o);
      std::cout << fmt::format("wrote {} tensors from {} to {}\n", r.tensors, r.checkpoint.string(),
                               o.output.string());
      return 0;
    };
  });
}

}  // namespace frugal::cli
