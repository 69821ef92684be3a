// `frugal eval SOURCE --data FILE [--seq-len T] [--stride S]`: mean loss and perplexity of a
// trained model (a run, a checkpoint or a Hugging Face folder) over a text or token file, in
// sliding windows (frugal/train/window_eval.h).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "checkpoint_source.h"
#include "commands.h"
#include "frugal/data/token_stream.h"
#include "frugal/data/tokenizer.h"
#include "frugal/engine/device.h"
#include "frugal/train/sample.h"
#include "frugal/train/window_eval.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::cli {
namespace {

bool is_text(const fs::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".txt" || ext == ".md" || ext == ".text";
}

// The file's token ids: text through the model's tokenizer (bytes for a 256-token vocabulary
// without one), anything else as a token file (nanoGPT or llm.c shards).
std::vector<int64_t> data_ids(const fs::path& file, const Config& cfg) {
  if (!fs::exists(file)) throw Error(fmt::format("eval: --data: '{}' does not exist", file.string()));
  std::vector<int64_t> ids;
  if (is_text(file)) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (auto tokenizer = sample_tokenizer(cfg)) return tokenizer->encode(text.str());
    if (cfg.model.vocab_size != 256) {
      throw Error(fmt::format("eval: --data: '{}' is text, and the model has no tokenizer "
                              "(a vocabulary of {} tokens is not bytes): give a token file",
                              file.string(), cfg.model.vocab_size));
    }
    for (unsigned char c : text.str()) ids.push_back(c);
    return ids;
  }
  const TokenStream stream = open_token_files(file.string(), TokenFormat::detect, "--data");
  stream.check_vocab(cfg.model.vocab_size, 0, stream.size(), "--data");
  ids.resize(static_cast<size_t>(stream.size()));
  stream.read(0, stream.size(), ids.data());
  return ids;
}

}  // namespace

void add_eval(CLI::App& app, Action& run) {
  struct Args {
    std::string source, data, device = "auto";
    int64_t seq_len = 0, stride = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "eval", "Mean loss and perplexity of a run, checkpoint or Hugging Face folder over a file");
  cmd->add_option("source", args->source, "Run directory, checkpoint or Hugging Face folder")
      ->required();
  cmd->add_option("--data", args->data,
                  "A text file (.txt, .md: the model's tokenizer) or a token file / folder of "
                  "shards (nanoGPT, llm.c)")
      ->required();
  cmd->add_option("--seq-len", args->seq_len, "Window length in tokens (default: the model's context)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  cmd->add_option("--stride", args->stride,
                  "Tokens between window starts (default: --seq-len; smaller gives each "
                  "prediction more context)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--device", args->device, "auto | cpu | cuda | cuda:N");
  cmd->callback([&run, args] {
    run = [args] {
      SourceModel m = load_source_model(args->source, "eval");
      const std::vector<int64_t> ids = data_ids(args->data, m.cfg);
      const int64_t seq_len = args->seq_len > 0 ? args->seq_len : m.cfg.model.block_size;
      if (seq_len > m.cfg.model.block_size) {
        throw Error(fmt::format("eval: --seq-len {} is longer than the model's context ({})",
                                seq_len, m.cfg.model.block_size));
      }
      const c10::Device device = resolve_device(args->device);
      m.model->to(device);
      m.model->eval();
      const WindowEval r = sliding_window_eval(*m.model, ids, seq_len,
                                               args->stride > 0 ? args->stride : seq_len, device);
      std::cout << fmt::format(
          "{{\"mean_loss\": {:.10g}, \"perplexity\": {:.10g}, \"tokens\": {}, \"predicted\": {}, "
          "\"windows\": {}, \"seq_len\": {}, \"stride\": {}}}\n",
          r.mean_loss, r.perplexity, ids.size(), r.predicted, r.windows, seq_len,
          args->stride > 0 ? args->stride : seq_len);
      return 0;
    };
  });
}

}  // namespace frugal::cli
