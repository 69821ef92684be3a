#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "frugal/data/text.h"

namespace frugal::cli {
namespace {

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string format;  // default: nanogpt for bytes, llmc with a tokenizer
  bool overwrite = false;
  std::string tokenizer;  // a tokenizer.json, a SentencePiece .model, or a folder; empty: bytes
};

}  // namespace

void add_prepare_text(CLI::App& app, Action& run) {
  auto args = std::make_shared<PrepareArgs>();
  auto* cmd = app.add_subcommand(
      "prepare-text",
      "Turn text files (or folders of them) into token shards: bytes, or a tokenizer's ids");
  cmd->add_option("inputs", args->inputs, "Text files or folders")->required();
  cmd->add_option("-o,--output", args->output, "Output .bin file")->required();
  cmd->add_option("--format", args->format,
                  "nanogpt (raw uint16; the default for bytes) | llmc (with header; the default "
                  "with --tokenizer)")
      ->check(CLI::IsMember({"nanogpt", "llmc"}));
  cmd->add_option("--tokenizer", args->tokenizer,
                  "A Hugging Face tokenizer.json, a SentencePiece .model, or a folder holding "
                  "one: each file a document, ended by the end-of-text token; uint32 llm.c "
                  "shards past 65536 tokens");
  cmd->add_flag("--overwrite", args->overwrite, "Replace the output file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const TokenFormat format = args->format == "llmc"      ? TokenFormat::llmc
                                 : args->format == "nanogpt" ? TokenFormat::nanogpt
                                 : args->tokenizer.empty()   ? TokenFormat::nanogpt
                                                             : TokenFormat::llmc;
      // (the library's one line says what was written)
      if (args->tokenizer.empty()) {
        prepare_text(args->inputs, args->output, format, args->overwrite);
      } else {
        prepare_text_tokenized(args->inputs, args->output, format, args->tokenizer,
                               args->overwrite);
      }
      return 0;
    };
  });
}

}  // namespace frugal::cli
