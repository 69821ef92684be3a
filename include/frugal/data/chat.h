// Instruction (chat) data: conversations read from JSONL files in the shapes instruction
// datasets come in, and rendered to text the way a model family's published chat template
// renders them, byte for byte what transformers' tokenizer.apply_chat_template(messages,
// tokenize=False) returns (tests/integration/test_chat_templates.cpp), cut into segments that
// say which text a model learns under `train_on: assistant` (docs/finetuning.md, "Instruction
// data and chat formats").
//
// No Jinja runs here: a template is recognised in the folder's tokenizer files as one of the
// published ones frugal knows, and rendered by code that does what that template does, refusing
// what it refuses. A template frugal does not know is an error, never a guess, since a render
// that differs from the model's own by one byte teaches the model a format it will not see.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace frugal {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // UTF-8, exactly as the file has it (a template may trim it)
};
using Conversation = std::vector<ChatMessage>;

// ---- Reading JSONL -------------------------------------------------------------------------

// The longest line read: a sample is a few KB to a few MB; a longer line is a file that is not
// JSONL (one JSON document over many lines has lines, not one), refused before it fills memory.
inline constexpr int64_t kChatLineMaxBytes = int64_t{64} << 20;

// One line of a JSONL file (without its line break) as a conversation. The shapes:
// - {"messages": [{"role": R, "content": C}, ...]}: R one of system, user, assistant; at least
//   one message. Other keys of a message are not read, but "tool_calls" is refused (tool calls
//   change what the templates render).
// - {"prompt": P, "completion": C}: strings give [user P, assistant C]; TRL's conversational
//   form (lists of messages) gives the prompt's messages, then the completion's.
// - {"instruction": I, "input": X, "output": O} (alpaca): [user U, assistant O], U = I when X is
//   missing, null or empty, else I + "\n\n" + X: the instruction, a blank line, the context, as
//   the chat versions of alpaca-style data join them (alpaca's own "### Input:" headers are a
//   prompt format of their own, which a chat template replaces).
// Keys outside the shape ("id", "source", ...) are ignored; keys of two shapes on one line are
// an error. Every error is a frugal::Error of one line, "FILE:LINE: what was expected", FILE
// and LINE only naming the place.
Conversation parse_chat_line(std::string_view line, const std::string& file, int64_t line_number);

// A JSONL file's lines one at a time, for callers that stream a large file. Empty lines (and
// lines of spaces, tabs and carriage returns) are skipped; a file ending without a line break
// ends with its last line all the same; a line longer than max_line_bytes is a frugal::Error
// naming FILE:LINE (before it fills memory).
class JsonlLineReader {
 public:
  explicit JsonlLineReader(const std::filesystem::path& file,
                           int64_t max_line_bytes = kChatLineMaxBytes);
  // The next non-blank line (valid until the next call), or nullopt at the end of the file.
  std::optional<std::string_view> next_line();
  // The line the last one came from (1-based; 0 before the first).
  int64_t line_number() const { return line_number_; }
  const std::string& file() const { return file_; }

 private:
  bool fill();  // reads more of the file into buffer_; false at its end

  std::string file_;
  int64_t max_line_bytes_;
  std::ifstream in_;
  std::string buffer_;
  size_t begin_ = 0;  // where the unread part of buffer_ starts
  bool at_end_ = false;
  int64_t line_number_ = 0;
};

// A chat JSONL file's conversations one at a time (parse_chat_line on each line).
class ChatJsonlReader : public JsonlLineReader {
 public:
  using JsonlLineReader::JsonlLineReader;
  // The next conversation, or nullopt at the end of the file.
  std::optional<Conversation> next();
};

// Every conversation of the file, in order.
std::vector<Conversation> read_chat_jsonl(const std::filesystem::path& file);

// ---- Chat formats -------------------------------------------------------------------------

// The families of published templates frugal renders (and Plain, its own, for base models):
// - Llama3: Meta-Llama-3-8B-Instruct's template: bos_token before the first message, each
//   message "<|start_header_id|>ROLE<|end_header_id|>\n\n" + content|trim + "<|eot_id|>"
//   (trim: Python's str.strip(), which removes Unicode whitespace too); the generation prompt
//   is an assistant header.
// - ChatML: "<|im_start|>ROLE\n" + content + "<|im_end|>\n" per message; the generation prompt
//   "<|im_start|>assistant\n". Some ChatML templates (Qwen2.5-Instruct, Qwen2-Instruct,
//   SmolLM2-Instruct) first insert a default system message when the first message is not a
//   system one: ChatTemplate::default_system.
// - Mistral: Mixtral-8x7B-Instruct-v0.1's template (Mistral-7B-Instruct-v0.2's before its
//   system-prompt revision): bos_token, then "[INST] " + content + " [/INST]" for user
//   messages and content + eos_token for assistant ones; roles must alternate user/assistant
//   from a user message, so a system message is refused; no generation prompt (a user message
//   already ends with the cue " [/INST]").
// - Plain (frugal's, for base models without a template): bos_token if the tokenizer has one,
//   then the messages separated by a blank line: "### System:\n" + content,
//   "### User:\n" + content, "### Assistant:\n" + content + eos_token; the generation prompt
//   "### Assistant:\n" (after a blank line when messages precede it).
enum class ChatFormat { Llama3, ChatML, Mistral, Plain };

// `name`: llama3, chatml, mistral or plain; anything else is a frugal::Error naming `key` (the
// config key, e.g. "data.chat_format") and the choices. ("auto" is detect_chat_template's.)
ChatFormat parse_chat_format(const std::string& name, const std::string& key);
const char* chat_format_name(ChatFormat format);

// The special tokens a template writes itself (the text of bos_token and eos_token).
struct ChatSpecialTokens {
  std::string bos;  // empty: the tokenizer has none
  std::string eos;
};

// What a render needs: the format, the tokens, the default system prompt of templates that
// insert one, and which published template it came from (for messages).
struct ChatTemplate {
  ChatFormat format = ChatFormat::Plain;
  ChatSpecialTokens tokens;
  // Set: a system message with this content comes first when the conversation does not start
  // with one (Qwen2.5's "You are Qwen, created by Alibaba Cloud. ...").
  std::optional<std::string> default_system;
  std::string source;  // "Meta-Llama-3-8B-Instruct", ...; empty when chosen by name
};

// bos_token and eos_token of the folder's tokenizer_config.json, each a string, an object with
// "content" (an AddedToken as saved by transformers) or null/missing (empty). A folder without
// tokenizer_config.json has none; a malformed file or value is a frugal::Error naming the key.
ChatSpecialTokens chat_special_tokens(const std::filesystem::path& hf_folder);

// The published template a Hugging Face folder holds, recognised: its chat_template.jinja when
// there is one (transformers reads that first), else tokenizer_config.json's chat_template, a
// string or a list of {"name", "template"} objects of which "default" is the one used. A
// template frugal does not know (another family, an edited one) or none is a frugal::Error of
// one line naming the file, pointing to `data.type: tokenized` (input_ids and labels rendered
// beforehand with transformers) and to a named data.chat_format.
ChatTemplate detect_chat_template(const std::filesystem::path& hf_folder);
ChatFormat detect_chat_format(const std::filesystem::path& hf_folder);

// The template a config names: "auto" is detect_chat_template(hf_folder); a format name is that
// format with the folder's special tokens (none without a folder) and no default system prompt.
ChatTemplate chat_template_for(const std::string& name, const std::string& key,
                               const std::filesystem::path& hf_folder);

// ---- Rendering ------------------------------------------------------------------------------

// A piece of a rendered conversation. `assistant` marks what a model learns under
// `train_on: assistant`: each assistant message's content as the template writes it (trimmed
// under Llama3) followed by the end-of-turn marker the model must learn to emit to stop:
// "<|eot_id|>" (Llama3), "<|im_end|>" (ChatML; not the "\n" after it), eos_token (Mistral,
// Plain). Never assistant: bos_token, role headers ("<|start_header_id|>assistant..." and the
// like), the text of system and user messages, separators, the generation prompt.
struct ChatSegment {
  std::string text;
  bool assistant = false;
};

// The conversation as the template renders it: the segments' texts, concatenated, equal
// transformers' apply_chat_template(conversation, tokenize=False, add_generation_prompt=...)
// with the published template. Neighbouring segments differ in `assistant`, none is empty.
// A conversation the template refuses (where its Jinja calls raise_exception: Mistral's
// non-alternating roles and system messages), an empty one (transformers refuses it too), a
// role outside system/user/assistant and a missing token the template writes are
// frugal::Errors saying what is wrong, and which message (0-based).
std::vector<ChatSegment> render_chat(const Conversation& conversation, const ChatTemplate& chat,
                                     bool add_generation_prompt);
std::vector<ChatSegment> render_chat(const Conversation& conversation, ChatFormat format,
                                     const ChatSpecialTokens& tokens, bool add_generation_prompt);
std::string render_chat_text(const Conversation& conversation, const ChatTemplate& chat,
                             bool add_generation_prompt);

// `text` without the Unicode whitespace at its ends, as Python's str.strip() (Jinja's trim)
// removes it: every code point str.isspace() holds (ASCII \t\n\v\f\r and space, \x1c-\x1f,
// U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), not the
// zero-width space U+200B or the BOM U+FEFF. Bytes that are not UTF-8 are kept.
std::string_view strip_unicode_whitespace(std::string_view text);

}  // namespace frugal
