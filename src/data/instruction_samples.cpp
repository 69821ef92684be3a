// Instruction data read into labeled tokens: chat conversations through a template and a
// tokenizer, or token ids rendered elsewhere (frugal/data/instruction_data.h).
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "frugal/data/batch.h"
#include "frugal/data/instruction_data.h"
#include "frugal/util/error.h"
#include "frugal/util/log.h"

namespace frugal {
namespace fs = std::filesystem;

TrainOn parse_train_on(const std::string& name, const std::string& key) {
  if (name == "assistant") return TrainOn::Assistant;
  if (name == "all") return TrainOn::All;
  if (name == "last") return TrainOn::Last;
  throw Error(fmt::format("{}: expected assistant, all or last, got '{}'", key, name));
}

LabeledTokens tokenize_conversation(const Conversation& conversation, const ChatTemplate& chat,
                                    const Tokenizer& tokenizer, TrainOn train_on) {
  const std::vector<ChatSegment> segments = render_chat(conversation, chat, false);
  // Under `last`, only the final run of assistant segments (the last assistant turn) counts.
  size_t last_from = segments.size();
  for (size_t i = segments.size(); i-- > 0;) {
    if (segments[i].assistant) {
      last_from = i;
    } else if (last_from != segments.size()) {
      break;
    }
  }
  LabeledTokens out;
  for (size_t i = 0; i < segments.size(); ++i) {
    const bool learned =
        train_on == TrainOn::All ||
        (segments[i].assistant && (train_on == TrainOn::Assistant || i >= last_from));
    for (int64_t id : tokenizer.encode(segments[i].text)) {
      out.ids.push_back(static_cast<int32_t>(id));
      out.labels.push_back(learned ? static_cast<int32_t>(id) : static_cast<int32_t>(kIgnoreIndex));
    }
  }
  return out;
}

namespace {

int line_of(int64_t line) { return static_cast<int>(std::min<int64_t>(line, INT_MAX)); }

bool has_target(const LabeledTokens& s) {
  // Position 0's label is never a target (nothing precedes it).
  return std::any_of(s.labels.begin() + std::min<size_t>(1, s.labels.size()), s.labels.end(),
                     [](int32_t l) { return l != kIgnoreIndex; });
}

// Applies the length policy and the "something to learn" rule, counting; false = dropped.
bool admit(LabeledTokens& s, const SamplePolicy& length, const std::string& file, int64_t line,
           InstructionStats* stats) {
  const auto n = static_cast<int64_t>(s.ids.size());
  if (n > length.max_tokens) {
    if (length.truncate == "error") {
      throw Error(
          located(file, line_of(line), 0,
                  fmt::format("{} tokens, longer than data.seq_len + 1 = {} (data.truncate: "
                              "error; right or left cut it)",
                              n, length.max_tokens)));
    }
    const int64_t cut = n - length.max_tokens;
    if (length.truncate == "left") {
      s.ids.erase(s.ids.begin(), s.ids.begin() + cut);
      s.labels.erase(s.labels.begin(), s.labels.begin() + cut);
    } else {
      s.ids.resize(static_cast<size_t>(length.max_tokens));
      s.labels.resize(static_cast<size_t>(length.max_tokens));
    }
    if (stats) ++stats->truncated;
  }
  if (s.ids.size() < 2 || !has_target(s)) {
    if (length.no_target == "error") {
      throw Error(located(file, line_of(line), 0,
                          "nothing to learn: no labelled token (an assistant turn under "
                          "data.train_on assistant or last) is left (data.no_target: error; "
                          "skip drops such samples and counts them)"));
    }
    if (stats) ++stats->no_target;
    return false;
  }
  if (stats) ++stats->samples;
  return true;
}

// An array of token ids of a tokenized line, each in [lo, vocab) or kIgnoreIndex when allowed.
std::vector<int32_t> id_array(const nlohmann::json& line, const char* key, int64_t vocab,
                              bool ignore_allowed, const std::string& where) {
  const auto it = line.find(key);
  if (it == line.end() || !it->is_array()) {
    throw Error(fmt::format("{} {}: expected an array of token ids", where, key));
  }
  std::vector<int32_t> out;
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& v = (*it)[i];
    const bool ok = v.is_number_integer() && ((v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab) ||
                                              (ignore_allowed && v.get<int64_t>() == kIgnoreIndex));
    if (!ok) {
      throw Error(fmt::format("{} {}[{}]: expected a token id from 0 to {}{}, got {}", where, key,
                              i, vocab - 1, ignore_allowed ? " or -100" : "", v.dump()));
    }
    out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return out;
}

}  // namespace

std::vector<LabeledTokens> read_chat_samples(const fs::path& file, const ChatTemplate& chat,
                                             const Tokenizer& tokenizer, TrainOn train_on,
                                             const SamplePolicy& length, InstructionStats* stats) {
  ChatJsonlReader reader(file);
  std::vector<LabeledTokens> out;
  while (auto conversation = reader.next()) {
    LabeledTokens s;
    try {
      s = tokenize_conversation(*conversation, chat, tokenizer, train_on);
    } catch (const Error& e) {
      throw Error(located(file.string(), line_of(reader.line_number()), 0, e.what()));
    }
    if (admit(s, length, file.string(), reader.line_number(), stats)) out.push_back(std::move(s));
  }
  return out;
}

std::vector<LabeledTokens> read_tokenized_samples(const fs::path& file, int64_t vocab_size,
                                                  const SamplePolicy& length,
                                                  InstructionStats* stats) {
  JsonlLineReader reader(file);
  std::vector<LabeledTokens> out;
  while (auto text = reader.next_line()) {
    const std::string where = located(file.string(), line_of(reader.line_number()), 0, "");
    nlohmann::json line;
    try {
      line = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{} not valid JSON ({})", where, e.what()));
    }
    if (!line.is_object()) throw Error(fmt::format("{} expected a JSON object", where));
    LabeledTokens s;
    s.ids = id_array(line, "input_ids", vocab_size, false, where);
    s.labels = line.contains("labels") ? id_array(line, "labels", vocab_size, true, where) : s.ids;
    if (s.labels.size() != s.ids.size()) {
      throw Error(fmt::format("{} labels: {} of them for {} input_ids (expected as many)", where,
                              s.labels.size(), s.ids.size()));
    }
    if (admit(s, length, file.string(), reader.line_number(), stats)) out.push_back(std::move(s));
  }
  return out;
}

std::vector<LabeledTokens> read_instruction_samples(const DataConfig& data,
                                                    const ModelConfig& model,
                                                    const std::string& file, const std::string& key,
                                                    InstructionStats* stats) {
  if (!fs::exists(file)) throw Error(fmt::format("{}: '{}' does not exist", key, file));
  const int64_t seq_len = data.seq_len > 0 ? data.seq_len : model.block_size;
  const SamplePolicy length{seq_len + 1, data.truncate, data.no_target};
  if (data.type == "tokenized")
    return read_tokenized_samples(file, model.vocab_size, length, stats);
  const fs::path folder =
      !data.tokenizer.empty() ? fs::path(data.tokenizer) : fs::path(model.init_from);
  if (folder.empty() || !fs::is_directory(folder)) {
    throw Error(
        fmt::format("data.tokenizer: data.type chat needs a tokenizer folder (set "
                    "data.tokenizer or model.init_from to a Hugging Face folder){}",
                    folder.empty() ? "" : fmt::format("; '{}' is not a folder", folder.string())));
  }
  const std::shared_ptr<Tokenizer> tokenizer = Tokenizer::load(folder);
  if (tokenizer->vocab_size() > model.vocab_size) {
    throw Error(fmt::format("data.tokenizer: '{}' has {} tokens, more than model.vocab_size {}",
                            folder.string(), tokenizer->vocab_size(), model.vocab_size));
  }
  const ChatTemplate chat = chat_template_for(data.chat_format, "data.chat_format", folder);
  return read_chat_samples(file, chat, *tokenizer, parse_train_on(data.train_on, "data.train_on"),
                           length, stats);
}

}  // namespace frugal
