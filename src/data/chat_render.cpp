// Conversations rendered as each supported family's published chat template renders them
// (include/frugal/data/chat.h), statement by statement: the same text in the same order, the
// same raise_exception cases, and segments that mark what an assistant turn teaches.
#include <fmt/format.h>

#include "frugal/data/chat.h"
#include "frugal/util/error.h"

namespace frugal {
namespace {

// The code point that starts at s[i] and its length in bytes, or false where s[i] does not
// start a well-formed UTF-8 sequence (overlong forms and surrogates included).
bool decode_utf8(std::string_view s, size_t i, uint32_t& cp, size_t& length) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    cp = lead;
    length = 1;
    return true;
  }
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  } else {
    return false;
  }
  if (i + length > s.size()) return false;
  cp = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  return cp >= least[length] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// str.isspace() (Python 3): the code points of bidirectional class WS, B or S, or category Zs.
bool python_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Collects the render: a segment continues while its kind does; empty text adds nothing.
class Segments {
 public:
  void add(std::string_view text, bool assistant) {
    if (text.empty()) return;
    if (out_.empty() || out_.back().assistant != assistant) out_.push_back({{}, assistant});
    out_.back().text += text;
  }
  std::vector<ChatSegment> take() { return std::move(out_); }

 private:
  std::vector<ChatSegment> out_;
};

std::string describe_template(const ChatTemplate& chat) {
  const std::string name = chat_format_name(chat.format);
  return chat.source.empty() ? fmt::format("the {} chat format", name)
                             : fmt::format("the {} chat template ({})", name, chat.source);
}

void need_token(const ChatTemplate& chat, const std::string& token, const char* key) {
  if (token.empty()) {
    throw Error(
        fmt::format("{} writes the tokenizer's {}, and it has none (tokenizer_config.json: "
                    "{})",
                    describe_template(chat), key, key));
  }
}

bool is_assistant(const ChatMessage& m) { return m.role == "assistant"; }

void render_llama3(const Conversation& conversation, const ChatTemplate& chat, bool generation,
                   Segments& out) {
  need_token(chat, chat.tokens.bos, "bos_token");
  for (size_t i = 0; i < conversation.size(); ++i) {
    const ChatMessage& m = conversation[i];
    if (i == 0) out.add(chat.tokens.bos, false);
    out.add("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
    out.add(strip_unicode_whitespace(m.content), is_assistant(m));
    out.add("<|eot_id|>", is_assistant(m));
  }
  if (generation) out.add("<|start_header_id|>assistant<|end_header_id|>\n\n", false);
}

void render_chatml(const Conversation& conversation, bool generation, Segments& out) {
  for (const ChatMessage& m : conversation) {
    out.add("<|im_start|>" + m.role + "\n", false);
    out.add(m.content, is_assistant(m));
    out.add("<|im_end|>", is_assistant(m));
    out.add("\n", false);
  }
  if (generation) out.add("<|im_start|>assistant\n", false);
}

// Raises where the template's raise_exception calls do, in the same order: a role that breaks
// the user/assistant alternation first, then a role other than those two.
void render_mistral(const Conversation& conversation, const ChatTemplate& chat, Segments& out) {
  need_token(chat, chat.tokens.bos, "bos_token");
  need_token(chat, chat.tokens.eos, "eos_token");
  out.add(chat.tokens.bos, false);
  for (size_t i = 0; i < conversation.size(); ++i) {
    const ChatMessage& m = conversation[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      throw Error(
          fmt::format("{} refuses message {} ({}): roles must alternate user, assistant, "
                      "user, ... from the first message, with no system message",
                      describe_template(chat), i, m.role));
    }
    if (m.role == "user") {
      out.add("[INST] " + m.content + " [/INST]", false);
    } else if (m.role == "assistant") {
      out.add(m.content, true);
      out.add(chat.tokens.eos, true);
    } else {
      throw Error(
          fmt::format("{} refuses message {} ({}): only user and assistant messages are "
                      "supported",
                      describe_template(chat), i, m.role));
    }
  }
}

void render_plain(const Conversation& conversation, const ChatTemplate& chat, bool generation,
                  Segments& out) {
  need_token(chat, chat.tokens.eos, "eos_token");  // an assistant turn must teach the stop
  out.add(chat.tokens.bos, false);
  for (size_t i = 0; i < conversation.size(); ++i) {
    const ChatMessage& m = conversation[i];
    const std::string separator = i == 0 ? "" : "\n\n";
    if (m.role == "assistant") {
      out.add(separator + "### Assistant:\n", false);
      out.add(m.content, true);
      out.add(chat.tokens.eos, true);
    } else {
      out.add(separator + (m.role == "system" ? "### System:\n" : "### User:\n") + m.content,
              false);
    }
  }
  if (generation)
    out.add(conversation.empty() ? "### Assistant:\n" : "\n\n### Assistant:\n", false);
}

}  // namespace

std::string_view strip_unicode_whitespace(std::string_view text) {
  size_t begin = 0;
  uint32_t cp = 0;
  size_t length = 0;
  while (begin < text.size() && decode_utf8(text, begin, cp, length) && python_whitespace(cp)) {
    begin += length;
  }
  size_t end = text.size();
  while (end > begin) {
    // The last code point starts at most 3 continuation bytes before the end.
    size_t start = end - 1;
    while (start > begin && end - start < 4 &&
           (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    if (!decode_utf8(text, start, cp, length) || start + length != end || !python_whitespace(cp)) {
      break;
    }
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::vector<ChatSegment> render_chat(const Conversation& conversation, const ChatTemplate& chat,
                                     bool add_generation_prompt) {
  if (conversation.empty()) {
    throw Error(
        fmt::format("{}: an empty conversation has nothing to render (transformers "
                    "refuses one too)",
                    describe_template(chat)));
  }
  for (size_t i = 0; i < conversation.size(); ++i) {
    const std::string& role = conversation[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw Error(fmt::format("{}: message {} has the role \"{}\", not system, user or assistant",
                              describe_template(chat), i, role));
    }
  }
  // Templates with a default system prompt render it as a first system message.
  Conversation with_system;
  const bool insert = chat.default_system && conversation.front().role != "system";
  if (insert) {
    with_system.reserve(conversation.size() + 1);
    with_system.push_back({"system", *chat.default_system});
    with_system.insert(with_system.end(), conversation.begin(), conversation.end());
  }
  const Conversation& messages = insert ? with_system : conversation;
  Segments out;
  switch (chat.format) {
    case ChatFormat::Llama3:
      render_llama3(messages, chat, add_generation_prompt, out);
      break;
    case ChatFormat::ChatML:
      render_chatml(messages, add_generation_prompt, out);
      break;
    case ChatFormat::Mistral:
      render_mistral(messages, chat, out);
      break;
    case ChatFormat::Plain:
      render_plain(messages, chat, add_generation_prompt, out);
      break;
  }
  return out.take();
}

std::vector<ChatSegment> render_chat(const Conversation& conversation, ChatFormat format,
                                     const ChatSpecialTokens& tokens, bool add_generation_prompt) {
  return render_chat(conversation, ChatTemplate{format, tokens, std::nullopt, {}},
                     add_generation_prompt);
}

std::string render_chat_text(const Conversation& conversation, const ChatTemplate& chat,
                             bool add_generation_prompt) {
  std::string text;
  for (const ChatSegment& segment : render_chat(conversation, chat, add_generation_prompt)) {
    text += segment.text;
  }
  return text;
}

}  // namespace frugal
