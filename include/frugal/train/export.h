// `frugal export` as a library call: a run's (or checkpoint's) weights written as one .pt or
// safetensors file, a Hugging Face folder (LoRA adapters merged into their layers, the
// tokenizer's files and special token ids carried over) or a PEFT adapter folder. Sharded
// checkpoints are put back together by name. The output appears whole or not at all: files
// are written atomically, folders in a temporary sibling published by rename, and an existing
// output is replaced (overwrite) only once its successor is complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace frugal {

struct ExportOptions {
  std::filesystem::path source;        // a run directory (its newest checkpoint) or a checkpoint
  std::string format = "safetensors";  // one of export_formats()
  std::filesystem::path output;        // a file (pt, safetensors) or a folder (hf, peft)
  bool overwrite = false;              // replace an existing output
  int64_t max_shard_bytes = int64_t{5120} << 20;  // hf: the largest safetensors shard
};

// "pt", "safetensors", "hf", "peft".
const std::vector<std::string>& export_formats();

struct ExportResult {
  std::filesystem::path checkpoint;  // the checkpoint read
  size_t tensors = 0;                // the tensors written
};

// Throws frugal::Error (naming the output or the checkpoint) for an existing output without
// overwrite, an unknown format, a damaged checkpoint, or a PEFT export of a run without LoRA.
ExportResult export_checkpoint(const ExportOptions& options);

}  // namespace frugal
