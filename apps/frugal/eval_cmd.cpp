// `frugal eval SOURCE --data FILE [--seq-len T] [--stride S]`: mean loss and perplexity of a
// trained model (a run, a checkpoint or a Hugging Face folder) over a text or token file, in
// sliding windows (frugal/train/window_eval.h).
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "frugal/data/batch.h"
#include "frugal/data/instruction_data.h"
#include "frugal/data/token_stream.h"
#include "frugal/data/tokenizer.h"
#include "frugal/engine/device.h"
#include "frugal/train/checkpoint_source.h"
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

// A text file's token ids: through the model's tokenizer (bytes for a 256-token vocabulary
// without one).
std::vector<int64_t> text_ids(const fs::path& file, const Config& cfg) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (auto tokenizer = sample_tokenizer(cfg)) return tokenizer->encode(text.str());
  if (cfg.model.vocab_size != 256) {
    throw Error(
        fmt::format("eval: --data: '{}' is text, and the model has no tokenizer "
                    "(a vocabulary of {} tokens is not bytes): give a token file",
                    file.string(), cfg.model.vocab_size));
  }
  const std::string bytes = text.str();
  const auto* first = reinterpret_cast<const unsigned char*>(bytes.data());  // bytes >= 128 too
  return std::vector<int64_t>(first, first + bytes.size());
}

// The mean loss over the tokens a chat JSONL file's conversations train (train_on assistant:
// the answers and their end-of-turn markers), each conversation whole (cut at seq_len + 1
// tokens from the right, as training cuts it), through the model's tokenizer and template.
int eval_chat(Model& model, const Config& cfg, const fs::path& file, int64_t seq_len,
              const c10::Device& device) {
  DataConfig data;
  data.type = "chat";
  data.seq_len = seq_len;
  InstructionStats stats;
  std::vector<LabeledTokens> samples =
      read_instruction_samples(data, cfg.model, file.string(), "--data", &stats);
  const auto n = static_cast<int64_t>(samples.size());
  if (n == 0)
    throw Error(
        fmt::format("eval: --data: '{}' has no conversation with an answer", file.string()));
  const InstructionDataset dataset(std::move(samples), seq_len, /*packing=*/false);
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t targets = 0;
  for (int64_t first = 0; first < n; first += 8) {
    std::vector<int64_t> rows;
    for (int64_t i = first; i < std::min(n, first + 8); ++i) rows.push_back(i);
    const Batch batch = dataset.get(rows).to(device);
    total += model.batch_loss_sum(batch).to(at::kDouble).item<double>();
    targets += batch.num_targets();
  }
  const double mean = total / static_cast<double>(targets);
  std::cout << fmt::format(
      "{{\"mean_loss\": {:.10g}, \"perplexity\": {:.10g}, \"conversations\": {}, \"skipped\": {}, "
      "\"predicted\": {}, \"truncated\": {}}}\n",
      mean, std::exp(mean), n, stats.no_target, targets, stats.truncated);
  return 0;
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
                  "A text file (.txt, .md: the model's tokenizer), a token file / folder of "
                  "shards (nanoGPT, llm.c), or chat JSONL (.jsonl: the loss over the answers)")
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
      const int64_t seq_len = args->seq_len > 0 ? args->seq_len : m.cfg.model.block_size;
      if (seq_len > m.cfg.model.block_size) {
        throw Error(fmt::format("eval: --seq-len {} is longer than the model's context ({})",
                                seq_len, m.cfg.model.block_size));
      }
      const c10::Device device = resolve_device(args->device);
      m.model->to(device);
      m.model->eval();
      if (fs::path(args->data).extension() == ".jsonl") {
        return eval_chat(*m.model, m.cfg, args->data, seq_len, device);
      }
      if (!fs::exists(args->data)) {
        throw Error(fmt::format("eval: --data: '{}' does not exist", args->data));
      }
      const int64_t stride = args->stride > 0 ? args->stride : seq_len;
      WindowEval r;
      int64_t tokens = 0;
      if (is_text(args->data)) {
        const std::vector<int64_t> ids = text_ids(args->data, m.cfg);
        tokens = static_cast<int64_t>(ids.size());
        r = sliding_window_eval(*m.model, ids, seq_len, stride, device);
      } else {
        // Token files (nanoGPT or llm.c shards) are read a window at a time.
        const TokenStream stream = open_token_files(args->data, TokenFormat::detect, "--data");
        stream.check_vocab(m.cfg.model.vocab_size, 0, stream.size(), "--data");
        tokens = stream.size();
        r = sliding_window_eval(*m.model, stream, seq_len, stride, device);
      }
      std::cout << fmt::format(
          "{{\"mean_loss\": {:.10g}, \"perplexity\": {:.10g}, \"tokens\": {}, \"predicted\": {}, "
          "\"windows\": {}, \"seq_len\": {}, \"stride\": {}}}\n",
          r.mean_loss, r.perplexity, tokens, r.predicted, r.windows, seq_len, stride);
      return 0;
    };
  });
}

}  // namespace frugal::cli
