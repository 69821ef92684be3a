// Instruction data from JSONL files (include/frugal/data/chat.h): one conversation per line in
// one of three shapes, each value checked against its JSON type, every error one line naming
// the file, the line and the key.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>

#include "frugal/data/chat.h"
#include "frugal/util/error.h"
#include "frugal/util/json_input.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace frugal {
namespace {

// A line's keys that pick its shape; keys of two shapes on one line are an error.
constexpr const char* kMessagesKeys[] = {"messages"};
constexpr const char* kPromptKeys[] = {"prompt", "completion"};
constexpr const char* kAlpacaKeys[] = {"instruction", "input", "output"};

// Where a value is, for messages: "FILE:LINE: KEY: ..." (json_input::Node's "FILE: KEY: ..."
// with the line in the file's place).
int line_for_messages(int64_t line) { return static_cast<int>(std::min<int64_t>(line, INT_MAX)); }

std::string where(const std::string& file, int64_t line) {
  return located(file, line_for_messages(line), 0, "");
}

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  return fmt::format("{} bytes", bytes);
}

// nlohmann's messages quote what they last read: a line's control characters must not end the
// one-line error.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

template <size_t N>
bool has_any(const json& object, const char* const (&keys)[N]) {
  for (const char* key : keys) {
    if (object.contains(key)) return true;
  }
  return false;
}

ChatMessage read_message(const json_input::Node& node) {
  node.object();
  if (auto calls = node.find("tool_calls")) {
    calls->fail(
        "tool calls are not supported (render such data with transformers and use "
        "data.type: tokenized)");
  }
  ChatMessage message;
  const json_input::Node role = node.at("role");
  message.role = role.string();
  if (message.role != "system" && message.role != "user" && message.role != "assistant") {
    role.fail(fmt::format("expected system, user or assistant, got {}",
                          json_input::describe(role.value())));
  }
  message.content = node.at("content").string();
  return message;
}

void append_messages(const json_input::Node& list, Conversation& out) {
  const json& items = list.array();
  if (items.empty()) list.fail("expected at least one message, got an empty list");
  for (size_t i = 0; i < items.size(); ++i) out.push_back(read_message(list.item(i)));
}

// prompt and completion: strings (one user and one assistant message) or lists of messages.
Conversation read_prompt_completion(const json_input::Node& row) {
  Conversation out;
  const json_input::Node prompt = row.at("prompt");
  const json_input::Node completion = row.at("completion");
  if (prompt.value().is_array()) {
    append_messages(prompt, out);
  } else if (prompt.value().is_string()) {
    out.push_back({"user", prompt.string()});
  } else {
    prompt.fail(fmt::format("expected a string or a list of messages, got {}",
                            json_input::describe(prompt.value())));
  }
  if (completion.value().is_array()) {
    append_messages(completion, out);
  } else if (completion.value().is_string()) {
    out.push_back({"assistant", completion.string()});
  } else {
    completion.fail(fmt::format("expected a string or a list of messages, got {}",
                                json_input::describe(completion.value())));
  }
  return out;
}

Conversation read_alpaca(const json_input::Node& row) {
  std::string user = row.at("instruction").string();
  const std::string input = row.string_or("input", "");
  if (!input.empty()) user += "\n\n" + input;
  return {{"user", std::move(user)}, {"assistant", row.at("output").string()}};
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

Conversation parse_chat_line(std::string_view line, const std::string& file, int64_t line_number) {
  // json_input::Node names "FILE: KEY"; with the line number in the file's place, its errors
  // read "FILE:LINE: KEY: ...".
  const std::string place = where(file, line_number);
  const std::string node_file = place.substr(0, place.size() - 2);  // without ": "
  json row;
  try {
    row = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    throw Error(one_line(fmt::format("{}not valid JSON ({})", place, e.what())));
  }
  const json_input::Node node(row, node_file);
  if (!row.is_object()) {
    node.fail(
        fmt::format("expected a JSON object with \"messages\", \"prompt\" and "
                    "\"completion\", or \"instruction\" and \"output\", got {}",
                    json_input::describe(row)));
  }
  const bool messages = has_any(row, kMessagesKeys);
  const bool prompt = has_any(row, kPromptKeys);
  const bool alpaca = has_any(row, kAlpacaKeys);
  if (messages + prompt + alpaca > 1) {
    node.fail(
        "mixes the keys of two shapes (\"messages\"; \"prompt\" and \"completion\"; "
        "\"instruction\", \"input\" and \"output\"): one shape per line");
  }
  if (messages) {
    Conversation out;
    append_messages(node.at("messages"), out);
    return out;
  }
  if (prompt) return read_prompt_completion(node);
  if (alpaca) return read_alpaca(node);
  node.fail(
      "expected \"messages\", \"prompt\" and \"completion\", or \"instruction\" and "
      "\"output\" (alpaca), found none of them");
}

JsonlLineReader::JsonlLineReader(const fs::path& file, int64_t max_line_bytes)
    : file_(file.string()), max_line_bytes_(max_line_bytes) {
  std::error_code ec;
  if (fs::is_directory(file, ec))
    throw Error(fmt::format("{}: a directory, not a JSONL file", file_));
  in_.open(file, std::ios::binary);
  if (!in_) throw Error(fmt::format("cannot read '{}': {}", file_, std::strerror(errno)));
}

bool JsonlLineReader::fill() {
  if (at_end_) return false;
  // Drop what was read; keep the unfinished line.
  buffer_.erase(0, begin_);
  begin_ = 0;
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t old_size = buffer_.size();
  buffer_.resize(old_size + kChunk);
  in_.read(buffer_.data() + old_size, static_cast<std::streamsize>(kChunk));
  const auto got = static_cast<size_t>(in_.gcount());
  buffer_.resize(old_size + got);
  if (in_.bad()) throw Error(fmt::format("cannot read '{}': {}", file_, std::strerror(errno)));
  if (got == 0) at_end_ = true;
  return got > 0;
}

std::optional<std::string_view> JsonlLineReader::next_line() {
  for (;;) {
    size_t end = buffer_.find('\n', begin_);
    // Read until the line ends, refusing one longer than the bound before it fills memory.
    while (end == std::string::npos) {
      const size_t searched = buffer_.size() - begin_;  // of the unfinished line, no '\n'
      if (static_cast<int64_t>(searched) > max_line_bytes_ || !fill()) break;
      end = buffer_.find('\n', begin_ + searched);
    }
    const size_t stop = end == std::string::npos ? buffer_.size() : end;
    if (stop == begin_ && end == std::string::npos) return std::nullopt;  // the file's end
    ++line_number_;
    if (static_cast<int64_t>(stop - begin_) > max_line_bytes_) {
      throw Error(located(file_, line_for_messages(line_number_), 0,
                          fmt::format("a line longer than the {} frugal reads of one sample (is "
                                      "this JSONL, one JSON object per line?)",
                                      size_text(max_line_bytes_))));
    }
    const std::string_view line(buffer_.data() + begin_, stop - begin_);
    begin_ = end == std::string::npos ? stop : end + 1;
    if (blank(line)) continue;
    return line;
  }
}

std::optional<Conversation> ChatJsonlReader::next() {
  const std::optional<std::string_view> line = next_line();
  if (!line) return std::nullopt;
  return parse_chat_line(*line, file(), line_number());
}

std::vector<Conversation> read_chat_jsonl(const fs::path& file) {
  ChatJsonlReader reader(file);
  std::vector<Conversation> out;
  while (auto conversation = reader.next()) out.push_back(std::move(*conversation));
  return out;
}

}  // namespace frugal
