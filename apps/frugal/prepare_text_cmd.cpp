#include <fmt/format.h>

#include <iostream>

#include "commands.h"
#include "frugal/data/text.h"

namespace frugal::cli {
namespace {

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string format = "nanogpt";
  bool overwrite = false;
};

}  // namespace

void add_prepare_text(CLI::App& app, Action& run) {
  auto args = std::make_shared<PrepareArgs>();
  auto* cmd = app.add_subcommand(
      "prepare-text", "Turn text files (or folders of them) into byte-level token shards");
  cmd->add_option("inputs", args->inputs, "Text files or folders")->required();
  cmd->add_option("-o,--output", args->output, "Output .bin file")->required();
  cmd->add_option("--format", args->format, "nanogpt (raw uint16) | llmc (with header)")
      ->check(CLI::IsMember({"nanogpt", "llmc"}));
  cmd->add_flag("--overwrite", args->overwrite, "Replace the output file if it exists");
  cmd->callback([&run, args] {
    run = [args] {
      const TokenFormat format = args->format == "llmc" ? TokenFormat::llmc : TokenFormat::nanogpt;
      const int64_t tokens = prepare_text(args->inputs, args->output, format, args->overwrite);
      std::cout << fmt::format("wrote {} tokens to {}\n", tokens, args->output);
      return 0;
    };
  });
}

}  // namespace frugal::cli
