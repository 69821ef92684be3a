// A Hugging Face folder's chat template recognised as one of the published templates frugal
// renders (include/frugal/data/chat.h), its special tokens, and chat formats by name.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "chat_templates.h"
#include "frugal/data/chat.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {
namespace {

constexpr const char* kTokenizerConfig = "tokenizer_config.json";
constexpr const char* kTemplateFile = "chat_template.jinja";  // transformers >= 4.47 saves it
constexpr const char* kTokenizedHint =
    "render the data with transformers into input_ids and labels and use data.type: tokenized, "
    "or name the format the model was trained on in data.chat_format (llama3, chatml, mistral, "
    "plain)";

// `text` with the escape \n inside the string literals of its tags written as the newline it
// stands for: published copies of one template differ in that, and Jinja reads both alike.
std::string unescape_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_tag = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (quote != 0) {
      if (c == '\\' && next == 'n') {
        out += '\n';
        ++i;
        continue;
      }
      if (c == '\\' && next != '\0') {  // another escape: kept whole, so \' does not end it
        out += c;
        out += next;
        ++i;
        continue;
      }
      if (c == quote) quote = 0;
    } else if (in_tag) {
      if ((c == '}' || c == '%') && next == '}') {
        in_tag = false;
      } else if (c == '\'' || c == '"') {
        quote = c;
      }
    } else if (c == '{' && (next == '{' || next == '%')) {
      in_tag = true;
      out += c;
      out += next;
      ++i;
      continue;
    }
    out += c;
  }
  return out;
}

// A template as Jinja reads it, for comparing: newlines unescaped, one final newline dropped
// (transformers' Jinja environment keeps no trailing newline).
std::string comparable(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return unescape_newlines(text);
}

// What a default system prompt may hold: text that stands for itself inside the template's
// quotes (no quote, escape, tag or line break), and no '<', which ends it in the templates
// ("...assistant.<|im_end|>").
constexpr const char* kNotInPrompt = "'\"\\{}%#<\n\r";

// The published template `text` is, with the default system prompt it carries; nullopt when
// it is none of them.
std::optional<ChatTemplate> recognise(const std::string& text) {
  const std::string candidate = comparable(text);
  for (const chat_templates::Published& published : chat_templates::published()) {
    std::optional<std::string> prompt;
    std::string joined(published.parts.front());
    if (published.parts.size() > 1) {
      // The prompt follows the first part (the same in comparable form: it ends inside the
      // quotes that hold the prompt) up to the first character it cannot hold.
      const std::string first = unescape_newlines(published.parts.front());
      if (candidate.compare(0, first.size(), first) != 0) continue;
      const size_t end = candidate.find_first_of(kNotInPrompt, first.size());
      prompt = candidate.substr(first.size(), end == std::string::npos ? end : end - first.size());
      for (size_t i = 1; i < published.parts.size(); ++i) {
        joined += *prompt;
        joined += published.parts[i];
      }
    }
    if (comparable(joined) != candidate) continue;
    ChatTemplate out;
    out.format = published.format;
    out.default_system = prompt;
    out.source = published.source;
    return out;
  }
  return std::nullopt;
}

// bos_token / eos_token: a string, an AddedToken object {"content": ...}, or null.
std::string special_token(const json_input::Node& config, const char* key) {
  const auto node = config.find(key);
  if (!node) return "";
  if (node->value().is_string()) return node->string();
  if (node->value().is_object()) return node->at("content").string();
  node->fail(fmt::format("expected a string, an object with \"content\" or null, got {}",
                         json_input::describe(node->value())));
}

ChatSpecialTokens tokens_of(const json_input::Node& config) {
  return {special_token(config, "bos_token"), special_token(config, "eos_token")};
}

// tokenizer_config.json's chat_template: a string, or the "default" of a list of
// {"name", "template"}; nullopt when there is none.
std::optional<std::string> config_template(const json_input::Node& config) {
  const auto node = config.find("chat_template");
  if (!node) return std::nullopt;
  if (node->value().is_string()) return node->string();
  if (!node->value().is_array()) {
    node->fail(fmt::format("expected a string or a list of {{\"name\", \"template\"}}, got {}",
                           json_input::describe(node->value())));
  }
  std::string names;
  for (size_t i = 0; i < node->value().size(); ++i) {
    const json_input::Node item = node->item(i);
    const std::string name = item.at("name").string();
    if (name == "default") return item.at("template").string();
    names += (names.empty() ? "" : ", ") + name;
  }
  node->fail(fmt::format("no template named \"default\" (the list has: {})",
                         names.empty() ? "none" : names));
}

}  // namespace

ChatFormat parse_chat_format(const std::string& name, const std::string& key) {
  for (ChatFormat format :
       {ChatFormat::Llama3, ChatFormat::ChatML, ChatFormat::Mistral, ChatFormat::Plain}) {
    if (name == chat_format_name(format)) return format;
  }
  throw Error(
      fmt::format("{}: expected auto, llama3, chatml, mistral or plain, got \"{}\"", key, name));
}

const char* chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::ChatML:
      return "chatml";
    case ChatFormat::Mistral:
      return "mistral";
    case ChatFormat::Plain:
      return "plain";
  }
  return "?";
}

ChatSpecialTokens chat_special_tokens(const fs::path& hf_folder) {
  const fs::path file = hf_folder / kTokenizerConfig;
  if (!fs::exists(file)) return {};
  const json doc = json_input::parse_file(file, json_input::kTokenizerConfigMaxBytes);
  const json_input::Node config(doc, file.string());
  config.object();
  return tokens_of(config);
}

ChatTemplate detect_chat_template(const fs::path& hf_folder) {
  const fs::path config_file = hf_folder / kTokenizerConfig;
  const fs::path template_file = hf_folder / kTemplateFile;
  ChatSpecialTokens tokens;
  std::optional<std::string> text;
  std::string from;  // the file the template came from, for messages
  // transformers reads chat_template.jinja when there is one, and the config's template then
  // does not count (it may be stale, or malformed).
  const bool has_template_file = fs::exists(template_file);
  if (has_template_file) {
    text = json_input::read_bounded(template_file, json_input::kTokenizerConfigMaxBytes);
    from = template_file.string();
  }
  if (fs::exists(config_file)) {
    const json doc = json_input::parse_file(config_file, json_input::kTokenizerConfigMaxBytes);
    const json_input::Node config(doc, config_file.string());
    config.object();
    tokens = tokens_of(config);
    if (!has_template_file) {
      text = config_template(config);
      from = config_file.string() + ": chat_template";
    }
  }
  if (!text) {
    throw Error(fmt::format("{}: no chat template (no chat_template in {}, no {}): {}",
                            hf_folder.string(), kTokenizerConfig, kTemplateFile, kTokenizedHint));
  }
  std::optional<ChatTemplate> chat = recognise(*text);
  if (!chat) {
    throw Error(
        fmt::format("{}: a chat template frugal does not render ({}), which begins {}; "
                    "frugal renders the published Llama 3, ChatML (Qwen2, Qwen2.5, "
                    "SmolLM2) and Mistral v0.1/v0.2 templates: {}",
                    from, fmt::format("{} characters", text->size()),
                    json_input::describe(json(*text)), kTokenizedHint));
  }
  chat->tokens = tokens;
  return *chat;
}

ChatFormat detect_chat_format(const fs::path& hf_folder) {
  return detect_chat_template(hf_folder).format;
}

ChatTemplate chat_template_for(const std::string& name, const std::string& key,
                               const fs::path& hf_folder) {
  if (name == "auto") {
    if (hf_folder.empty()) {
      throw Error(
          fmt::format("{}: auto reads the chat template of the model's Hugging Face "
                      "folder (model.init_from), and the run has none: name the format "
                      "(llama3, chatml, mistral, plain)",
                      key));
    }
    return detect_chat_template(hf_folder);
  }
  ChatTemplate chat;
  chat.format = parse_chat_format(name, key);
  if (!hf_folder.empty()) chat.tokens = chat_special_tokens(hf_folder);
  return chat;
}

}  // namespace frugal
