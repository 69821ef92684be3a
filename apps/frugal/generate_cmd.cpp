// `frugal generate SOURCE (--prompt TEXT | --prompt-ids IDS) [...]`: text from a run, a
// checkpoint or a Hugging Face folder, decoded with a key/value cache (frugal/models/decode.h),
// streamed to stdout as it is made; the speed goes to stderr.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "frugal/data/chat.h"
#include "frugal/data/tokenizer.h"
#include "frugal/engine/device.h"
#include "frugal/hf/folder.h"
#include "frugal/models/decode.h"
#include "frugal/train/checkpoint_source.h"
#include "frugal/train/sample.h"
#include "frugal/util/error.h"

namespace fs = std::filesystem;

namespace frugal::cli {
namespace {

struct Args {
  std::string source, prompt, prompt_ids, chat, system, chat_format = "auto", device = "auto",
                                                        dtype = "auto";
  int64_t max_new_tokens = 128, top_k = 0;
  double temperature = 0.0, top_p = 1.0;
  uint64_t seed = 0;
  bool ids = false;
};

// "1,2,3" -> ids, each within the vocabulary.
std::vector<int64_t> parse_ids(const std::string& text, int64_t vocab) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || id < 0 || id >= vocab) {
      throw Error(fmt::format("generate: --prompt-ids: '{}' is not a token id from 0 to {}", item,
                              vocab - 1));
    }
    ids.push_back(id);
  }
  return ids;
}

at::ScalarType parse_dtype(const std::string& name, const c10::Device& device) {
  if (name == "auto") return device.is_cuda() ? at::kBFloat16 : at::kFloat;
  if (name == "fp32") return at::kFloat;
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  throw Error("generate: --dtype: expected auto, fp32, bf16 or fp16, got '" + name + "'");
}

// Prints the text of the new tokens as they come. A token may end inside a UTF-8 character
// (byte-level BPE splits them), which the tokenizer decodes as U+FFFD until the next token
// completes it: text ending in an unfinished character or a U+FFFD waits for the next token,
// and finish() writes whatever is left, so the whole output is the decoding of all the tokens.
class TextStream {
 public:
  TextStream(const Tokenizer* tokenizer, std::vector<int64_t> hidden)
      : tokenizer_(tokenizer), hidden_(std::move(hidden)) {}

  void add(int64_t id) {
    if (std::find(hidden_.begin(), hidden_.end(), id) != hidden_.end()) return;
    ids_.push_back(id);
    const std::string text = decoded();
    write(text, settled(text));
  }
  void finish() {
    const std::string text = decoded();
    write(text, text.size());
  }

 private:
  std::string decoded() const {
    if (tokenizer_) return tokenizer_->decode(ids_);
    std::string bytes;
    for (int64_t b : ids_) bytes.push_back(static_cast<char>(b));
    return bytes;
  }

  // Writes text[written_, end) when the text before it is what was written already.
  void write(const std::string& text, size_t end) {
    if (end <= written_ || text.compare(0, written_, written_text_) != 0) return;
    std::cout << text.substr(written_, end - written_) << std::flush;
    written_text_ = text.substr(0, end);
    written_ = end;
  }

  // The length of `text` without an unfinished UTF-8 character or U+FFFDs at its end.
  static size_t settled(const std::string& text) {
    static const std::string kReplacement = "\xEF\xBF\xBD";
    size_t end = text.size();
    while (end >= 3 && text.compare(end - 3, 3, kReplacement) == 0) end -= 3;
    size_t i = end, back = 0;
    while (i > 0 && back < 3 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) {
      --i;
      ++back;
    }
    if (i == 0) return end;
    const unsigned char lead = static_cast<unsigned char>(text[i - 1]);
    const size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    return need > back ? i - 1 : end;
  }

  const Tokenizer* tokenizer_;
  std::vector<int64_t> hidden_;  // stop tokens: they end the text, they are not printed
  std::vector<int64_t> ids_;
  std::string written_text_;
  size_t written_ = 0;
};

int run_generate(const Args& a) {
  SourceModel m = load_source_model(a.source, "generate");
  const c10::Device device = resolve_device(a.device);
  m.model->to(device, parse_dtype(a.dtype, device));
  const fs::path init_from = m.cfg.model.init_from;
  const fs::path folder = fs::is_directory(init_from) ? init_from : fs::path();
  std::shared_ptr<Tokenizer> tokenizer = sample_tokenizer(m.cfg);
  const bool bytes = !tokenizer && m.cfg.model.vocab_size == 256;

  std::vector<int64_t> prompt;
  std::vector<int64_t> chat_stops;
  if (!a.chat.empty()) {
    // The message as the model's chat template frames it, ending in the assistant's header.
    if (!tokenizer) {
      throw Error(fmt::format("generate: --chat needs a tokenizer, and '{}' has none", a.source));
    }
    const ChatTemplate chat = chat_template_for(a.chat_format, "--chat-format", folder);
    Conversation conversation;
    if (!a.system.empty()) conversation.push_back({"system", a.system});
    conversation.push_back({"user", a.chat});
    prompt =
        tokenizer->encode(render_chat_text(conversation, chat, /*add_generation_prompt=*/true));
    // A turn ends at the template's end-of-turn marker, whatever the folder's eos says.
    for (const std::string& marker :
         {std::string("<|im_end|>"), std::string("<|eot_id|>"), chat.tokens.eos}) {
      if (auto id = marker.empty() ? std::nullopt : tokenizer->token_id(marker))
        chat_stops.push_back(*id);
    }
  } else if (!a.prompt_ids.empty()) {
    prompt = parse_ids(a.prompt_ids, m.cfg.model.vocab_size);
  } else if (tokenizer) {
    prompt = tokenizer->encode(a.prompt);
  } else if (bytes) {
    for (unsigned char c : a.prompt) prompt.push_back(c);
  } else {
    throw Error(
        fmt::format("generate: '{}' has no tokenizer (and a vocabulary of {} tokens is "
                    "not bytes): give --prompt-ids",
                    a.source, m.cfg.model.vocab_size));
  }
  DecodeOptions o;
  o.max_new_tokens = a.max_new_tokens;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.seed = a.seed;
  o.stop_tokens = hf::stop_token_ids(folder, m.cfg.data.eot_token);
  o.stop_tokens.insert(o.stop_tokens.end(), chat_stops.begin(), chat_stops.end());

  const bool text = !a.ids && (tokenizer || bytes);
  TextStream stream(tokenizer.get(), o.stop_tokens);
  const DecodeResult r = decode(*m.model, prompt, o, [&](int64_t id) {
    if (text) stream.add(id);
  });
  if (text) {
    stream.finish();
    std::cout << "\n";
  } else {
    std::cout << fmt::format("{{\"prompt\": [{}], \"tokens\": [{}], \"stopped\": {}}}\n",
                             fmt::join(prompt, ", "), fmt::join(r.tokens, ", "), r.stopped);
  }
  const double seconds = r.prompt_seconds + r.decode_seconds;
  const size_t n = r.tokens.size();
  std::cerr << fmt::format(
      "generate: {} tokens in {:.3f} s ({:.1f} tokens/s; prompt {} tokens and the first new one "
      "in {:.3f} s, then {:.1f} tokens/s){}\n",
      n, seconds, n / std::max(seconds, 1e-9), prompt.size(), r.prompt_seconds,
      n > 1 ? (n - 1) / std::max(r.decode_seconds, 1e-9) : 0.0,
      r.stopped ? ", stopped at the end-of-text token" : "");
  return 0;
}

}  // namespace

void add_generate(CLI::App& app, Action& run) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "generate", "Text from a run, checkpoint or Hugging Face folder, with a key/value cache");
  cmd->add_option("source", args->source, "Run directory, checkpoint or Hugging Face folder")
      ->required();
  auto* prompt = cmd->add_option("--prompt", args->prompt, "Text to continue");
  auto* prompt_ids =
      cmd->add_option("--prompt-ids", args->prompt_ids,
                      "Token ids to continue, comma-separated (no tokenizer needed)");
  auto* chat = cmd->add_option("--chat", args->chat,
                               "A user message, framed by the model's chat template (its answer "
                               "ends at the end of the turn)");
  prompt->excludes(prompt_ids);
  chat->excludes(prompt)->excludes(prompt_ids);
  cmd->add_option("--system", args->system, "--chat: a system message before it");
  cmd->add_option("--chat-format", args->chat_format,
                  "--chat: auto (the folder's template) | llama3 | chatml | mistral | plain");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Most tokens to generate")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--temperature", args->temperature,
                  "0 (the default) = greedy; above 0 samples from softmax(logits / temperature)")
      ->check(at_least(0.0));
  cmd->add_option("--top-k", args->top_k, "Sample among the k most likely tokens (0 = all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--top-p", args->top_p,
                  "Sample among the fewest tokens whose probabilities reach p (1 = all)")
      ->check(CLI::Range(0.0, 1.0).description("a number in (0, 1]") & above(0.0));
  cmd->add_option("--seed", args->seed, "The sampling generator's seed");
  cmd->add_option("--device", args->device, "auto | cpu | cuda | cuda:N");
  cmd->add_option("--dtype", args->dtype,
                  "auto (bf16 on CUDA, fp32 on the CPU) | fp32 | bf16 | fp16");
  cmd->add_flag("--ids", args->ids,
                "Print the prompt's and the new tokens' ids as one JSON line instead of text");
  cmd->callback([&run, args, prompt, prompt_ids, chat] {
    if (prompt->count() == 0 && prompt_ids->count() == 0 && chat->count() == 0) {
      throw CLI::RequiredError("--prompt, --chat or --prompt-ids");
    }
    run = [args] { return run_generate(*args); };
  });
}

}  // namespace frugal::cli
