// Instruction data (include/frugal/data/chat.h): the three JSONL shapes, the one-line errors
// naming FILE:LINE for each bad input, chat formats by name and detected in Hugging Face
// folders, the segments a render is cut into, Python's str.strip() on Unicode whitespace and
// the refusals. tests/integration/test_chat_templates.cpp compares the renders with
// transformers.
#include <catch2/catch.hpp>

#include "frugal/data/chat.h"
#include "frugal/util/error.h"
#include "support/helpers.h"

using namespace frugal;

namespace chat_test {

// The conversation of a one-line file `text` (parse_chat_line as read_chat_jsonl calls it).
Conversation parse(const std::string& text) { return parse_chat_line(text, "data.jsonl", 7); }

// The message of the frugal::Error that parsing `text` throws; fails when it throws none or a
// message of more than one line.
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return what;
  }
  FAIL("no error for " << text);
  return {};
}

bool same(const Conversation& a, const Conversation& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].role != b[i].role || a[i].content != b[i].content) return false;
  }
  return true;
}

// A tokenizer_config.json holding `chat_template` (a JSON value) and the tokens.
void write_config(const test::TempDir& dir, const std::string& chat_template,
                  const std::string& tokens = R"("bos_token": "<s>", "eos_token": "</s>")") {
  test::write_text(dir / "tokenizer_config.json",
                   "{" + tokens + ", \"chat_template\": " + chat_template + "}");
}

// SmolLM2-Instruct's template with another default system prompt, JSON-encoded.
std::string smollm2_shape(const std::string& prompt) {
  return R"("{% for message in messages %}{% if loop.first and messages[0]['role'] != )"
         R"('system' %}{{ '<|im_start|>system\n)" +
         prompt +
         R"(<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + )"
         R"(message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if )"
         R"(add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")";
}

// Meta-Llama-3-8B-Instruct's template, JSON-encoded.
const std::string kLlama3 =
    R"("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = )"
    R"('<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] )"
    R"(| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + )"
    R"(content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ )"
    R"('<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")";

std::vector<std::pair<std::string, bool>> flat(const std::vector<ChatSegment>& segments) {
  std::vector<std::pair<std::string, bool>> out;
  for (const ChatSegment& s : segments) out.emplace_back(s.text, s.assistant);
  return out;
}

}  // namespace chat_test

using chat_test::error_of;
using chat_test::parse;

TEST_CASE("chat JSONL: messages and prompt-completion and alpaca lines", "[unit][data][chat]") {
  using chat_test::same;
  CHECK(same(parse(R"({"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hi \u00e9"}, {"role": "assistant",
                      "content": ""}], "id": 3})"),
             {{"system", "Be brief."}, {"user", "Hi \xc3\xa9"}, {"assistant", ""}}));
  // Other keys of a message are not read.
  CHECK(same(parse(R"({"messages": [{"role": "user", "content": "a", "name": "x"}]})"),
             {{"user", "a"}}));
  CHECK(same(parse(R"({"prompt": "2+2?", "completion": " 4"})"),
             {{"user", "2+2?"}, {"assistant", " 4"}}));
  // TRL's conversational prompt-completion: lists of messages.
  CHECK(same(parse(R"({"prompt": [{"role": "system", "content": "s"}, {"role": "user",
                      "content": "u"}], "completion": [{"role": "assistant", "content": "a"}]})"),
             {{"system", "s"}, {"user", "u"}, {"assistant", "a"}}));
  // Alpaca: the input after a blank line, when there is one.
  CHECK(same(parse(R"({"instruction": "Sum.", "input": "2 2", "output": "4"})"),
             {{"user", "Sum.\n\n2 2"}, {"assistant", "4"}}));
  CHECK(same(parse(R"({"instruction": "Sum.", "input": "", "output": "4"})"),
             {{"user", "Sum."}, {"assistant", "4"}}));
  CHECK(same(parse(R"({"instruction": "Sum.", "input": null, "output": "4"})"),
             {{"user", "Sum."}, {"assistant", "4"}}));
  CHECK(same(parse(R"({"instruction": "Sum.", "output": "4"})"),
             {{"user", "Sum."}, {"assistant", "4"}}));
}

TEST_CASE("chat JSONL: a file read whole or streamed skips blank lines", "[unit][data][chat]") {
  test::TempDir dir("frugal-chat");
  // Blank lines (CRLF too) are skipped but counted; the last line has no line break.
  test::write_text(dir / "data.jsonl",
                   "{\"prompt\": \"a\", \"completion\": \"b\"}\r\n\n  \t\r\n"
                   "{\"instruction\": \"i\", \"output\": \"o\"}\n"
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"last\"}]}");
  const std::vector<Conversation> all = read_chat_jsonl(dir / "data.jsonl");
  REQUIRE(all.size() == 3);
  CHECK(all[0][1].content == "b");
  CHECK(all[1][0].content == "i");
  CHECK(all[2][0].content == "last");
  ChatJsonlReader reader(dir / "data.jsonl");
  CHECK(reader.next()->at(0).content == "a");
  CHECK(reader.line_number() == 1);
  CHECK(reader.next()->at(0).content == "i");
  CHECK(reader.line_number() == 4);
  CHECK(reader.next()->at(0).content == "last");
  CHECK(reader.line_number() == 5);
  CHECK_FALSE(reader.next());
  CHECK_FALSE(reader.next());
  test::write_text(dir / "empty.jsonl", "");
  CHECK(read_chat_jsonl(dir / "empty.jsonl").empty());
  // Errors name the file and the line, blank lines counted.
  test::write_text(
      dir / "bad.jsonl",
      "\n{\"prompt\": \"a\", \"completion\": \"b\"}\n\n{\"prompt\": 1, \"completion\": \"b\"}\n");
  CHECK_THROWS_WITH(read_chat_jsonl(dir / "bad.jsonl"),
                    Catch::StartsWith((dir / "bad.jsonl").string() + ":4: prompt: "));
  // A line longer than the bound is refused before it is read whole.
  test::write_text(dir / "long.jsonl",
                   "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"" +
                       std::string(100, 'x') + "\", \"completion\": \"b\"}\n");
  ChatJsonlReader bounded(dir / "long.jsonl", 64);
  CHECK(bounded.next());
  CHECK_THROWS_WITH(bounded.next(), Catch::Contains("long.jsonl:2: a line longer than the 64 "
                                                    "bytes frugal reads of one sample"));
  CHECK_THROWS_WITH(read_chat_jsonl(dir / "missing.jsonl"),
                    Catch::Contains("cannot read") && Catch::Contains("missing.jsonl"));
  CHECK_THROWS_WITH(read_chat_jsonl(dir.path()), Catch::Contains("a directory"));
}

TEST_CASE("chat JSONL: each bad line is one error naming the file and line", "[unit][data][chat]") {
  CHECK_THAT(error_of("{\"prompt\": "), Catch::StartsWith("data.jsonl:7: not valid JSON"));
  CHECK_THAT(error_of("{\"prompt\": \"\xff\", \"completion\": \"b\"}"),
             Catch::StartsWith("data.jsonl:7: not valid JSON"));
  CHECK_THAT(error_of("[1, 2]"), Catch::StartsWith("data.jsonl:7: expected a JSON object with "
                                                   "\"messages\""));
  CHECK_THAT(error_of(R"({"text": "hi"})"),
             Catch::StartsWith("data.jsonl:7: expected \"messages\", \"prompt\" and "
                               "\"completion\", or \"instruction\" and \"output\""));
  CHECK_THAT(error_of(R"({"messages": [], "prompt": "a", "completion": "b"})"),
             Catch::StartsWith("data.jsonl:7: mixes the keys of two shapes"));
  CHECK(error_of(R"({"prompt": "a"})") == "data.jsonl:7: completion: missing");
  CHECK(error_of(R"({"prompt": 3, "completion": "b"})") ==
        "data.jsonl:7: prompt: expected a string or a list of messages, got 3");
  CHECK(error_of(R"({"instruction": "i", "input": 2, "output": "o"})") ==
        "data.jsonl:7: input: expected a string, got 2");
  CHECK(error_of(R"({"instruction": "i"})") == "data.jsonl:7: output: missing");
  CHECK(error_of(R"({"messages": {"role": "user"}})") ==
        "data.jsonl:7: messages: expected an array, got an object");
  CHECK(error_of(R"({"messages": []})") ==
        "data.jsonl:7: messages: expected at least one message, got an empty list");
  CHECK(error_of(R"({"messages": ["hi"]})") ==
        "data.jsonl:7: messages[0]: expected an object, got \"hi\"");
  CHECK(error_of(R"({"messages": [{"role": "user"}]})") ==
        "data.jsonl:7: messages[0].content: missing");
  CHECK(error_of(R"({"messages": [{"role": "user", "content": null}]})") ==
        "data.jsonl:7: messages[0].content: expected a string, got null");
  CHECK(error_of(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})") ==
        "data.jsonl:7: messages[0].content: expected a string, got an array");
  CHECK(error_of(R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool",
                    "content": "b"}]})") ==
        "data.jsonl:7: messages[1].role: expected system, user or assistant, got \"tool\"");
  CHECK(error_of(R"({"messages": [{"role": 1, "content": "b"}]})") ==
        "data.jsonl:7: messages[0].role: expected a string, got 1");
  CHECK_THAT(error_of(R"({"messages": [{"role": "assistant", "content": "",
                         "tool_calls": [{"name": "f"}]}]})"),
             Catch::StartsWith("data.jsonl:7: messages[0].tool_calls: tool calls are not "
                               "supported") &&
                 Catch::Contains("data.type: tokenized"));
  CHECK(error_of(R"({"prompt": [], "completion": "b"})") ==
        "data.jsonl:7: prompt: expected at least one message, got an empty list");
}

TEST_CASE("chat formats by name", "[unit][data][chat]") {
  CHECK(parse_chat_format("llama3", "data.chat_format") == ChatFormat::Llama3);
  CHECK(parse_chat_format("chatml", "data.chat_format") == ChatFormat::ChatML);
  CHECK(parse_chat_format("mistral", "data.chat_format") == ChatFormat::Mistral);
  CHECK(parse_chat_format("plain", "data.chat_format") == ChatFormat::Plain);
  CHECK_THROWS_WITH(parse_chat_format("llama-3", "data.chat_format"),
                    "data.chat_format: expected auto, llama3, chatml, mistral or plain, got "
                    "\"llama-3\"");
  CHECK(std::string(chat_format_name(ChatFormat::ChatML)) == "chatml");
  CHECK_THROWS_WITH(chat_template_for("auto", "data.chat_format", {}),
                    Catch::StartsWith("data.chat_format: auto reads the chat template"));
  const ChatTemplate named = chat_template_for("plain", "data.chat_format", {});
  CHECK(named.format == ChatFormat::Plain);
  CHECK(named.tokens.eos.empty());
}

TEST_CASE("chat template detection in a Hugging Face folder", "[unit][data][chat]") {
  test::TempDir dir("frugal-chat-detect");
  // No tokenizer files: no template, no tokens.
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("no chat template") && Catch::Contains("data.type: tokenized"));
  CHECK(chat_special_tokens(dir.path()).bos.empty());

  chat_test::write_config(dir, chat_test::kLlama3,
                          R"("bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>"},
                             "eos_token": "<|eot_id|>")");
  ChatTemplate chat = detect_chat_template(dir.path());
  CHECK(chat.format == ChatFormat::Llama3);
  CHECK(chat.source == "Meta-Llama-3-8B-Instruct");
  CHECK_FALSE(chat.default_system);
  CHECK(chat.tokens.bos == "<|begin_of_text|>");
  CHECK(chat.tokens.eos == "<|eot_id|>");
  CHECK(detect_chat_format(dir.path()) == ChatFormat::Llama3);
  CHECK(chat_template_for("auto", "data.chat_format", dir.path()).format == ChatFormat::Llama3);
  // A named format takes the folder's tokens and no default system prompt.
  const ChatTemplate named = chat_template_for("chatml", "data.chat_format", dir.path());
  CHECK(named.format == ChatFormat::ChatML);
  CHECK(named.tokens.bos == "<|begin_of_text|>");
  CHECK(named.source.empty());

  // The ChatML shape with a default system prompt, whatever the prompt.
  chat_test::write_config(dir, chat_test::smollm2_shape("Be brief, and kind."));
  chat = detect_chat_template(dir.path());
  CHECK(chat.format == ChatFormat::ChatML);
  REQUIRE(chat.default_system);
  CHECK(*chat.default_system == "Be brief, and kind.");
  CHECK(render_chat_text({{"user", "hi"}}, chat, true) ==
        "<|im_start|>system\nBe brief, and kind.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(render_chat_text({{"system", "S"}, {"user", "hi"}}, chat, false) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
  // A prompt Jinja would read otherwise (an escape, a quote) is not recognised.
  chat_test::write_config(dir, chat_test::smollm2_shape("Don\\\\'t."));
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("a chat template frugal does not render"));

  // A list of named templates: "default" is the one; chat_template.jinja overrides the config.
  chat_test::write_config(dir,
                          "[{\"name\": \"tool_use\", \"template\": \"{{ 1 }}\"}, "
                          "{\"name\": \"default\", \"template\": " +
                              chat_test::kLlama3 + "}]");
  CHECK(detect_chat_format(dir.path()) == ChatFormat::Llama3);
  chat_test::write_config(dir, R"([{"name": "tool_use", "template": "{{ 1 }}"}])");
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("tokenizer_config.json: chat_template: no template named "
                                    "\"default\" (the list has: tool_use)"));
  test::write_text(dir / "chat_template.jinja",
                   "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                   "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if "
                   "add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}\n");
  chat = detect_chat_template(dir.path());
  CHECK(chat.format == ChatFormat::ChatML);
  CHECK(chat.source == "OpenHermes-2.5-Mistral-7B");
  CHECK(chat.tokens.eos == "</s>");

  // An unknown template (Llama 3.1's starts like this) is refused, naming the file.
  test::write_text(dir / "chat_template.jinja",
                   "{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = "
                   "custom_tools %}\n{%- endif %}");
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("chat_template.jinja: a chat template frugal does not "
                                    "render") &&
                        Catch::Contains("data.type: tokenized") &&
                        Catch::Contains("data.chat_format"));
  std::filesystem::remove(dir / "chat_template.jinja");
  // One byte off a published template is another template.
  std::string edited = chat_test::kLlama3;
  edited.replace(edited.find("| trim"), 6, "");
  chat_test::write_config(dir, edited);
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("tokenizer_config.json: chat_template: a chat template "
                                    "frugal does not render"));
  // Ill-typed values name their key.
  chat_test::write_config(dir, "7");
  CHECK_THROWS_WITH(detect_chat_template(dir.path()),
                    Catch::Contains("tokenizer_config.json: chat_template: expected a string "
                                    "or a list"));
  chat_test::write_config(dir, chat_test::kLlama3, R"("bos_token": 1)");
  CHECK_THROWS_WITH(chat_special_tokens(dir.path()),
                    Catch::Contains("tokenizer_config.json: bos_token: expected a string, an "
                                    "object with \"content\" or null, got 1"));
  chat_test::write_config(dir, chat_test::kLlama3, R"("bos_token": null)");
  CHECK(chat_special_tokens(dir.path()).bos.empty());
  CHECK(chat_special_tokens(dir.path()).eos.empty());
}

TEST_CASE("Python str.strip on UTF-8: Unicode whitespace and nothing else", "[unit][data][chat]") {
  CHECK(strip_unicode_whitespace(" \t\n\v\f\rx y\x1c\x1d\x1e\x1f") == "x y");
  // U+0085, U+00A0, U+1680, U+2000, U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
  CHECK(strip_unicode_whitespace("\xc2\x85\xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x8a"
                                 "a\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\x9f\xe3\x80\x80") ==
        "a");
  // Zero-width space, BOM, Mongolian vowel separator, word joiner: kept.
  CHECK(strip_unicode_whitespace("\xe2\x80\x8b a \xef\xbb\xbf") == "\xe2\x80\x8b a \xef\xbb\xbf");
  CHECK(strip_unicode_whitespace("\xe1\xa0\x8e"
                                 "a"
                                 "\xe2\x81\xa0") ==
        "\xe1\xa0\x8e"
        "a"
        "\xe2\x81\xa0");
  CHECK(strip_unicode_whitespace("  \xe3\x80\x80 ").empty());
  CHECK(strip_unicode_whitespace("").empty());
  // Not UTF-8: kept, and so is what it hides (a stray continuation byte, a truncated sequence).
  CHECK(strip_unicode_whitespace(" \x80 ") == "\x80");
  CHECK(strip_unicode_whitespace("a \xe3\x80") == "a \xe3\x80");
  CHECK(strip_unicode_whitespace("\xc0\xa0 a") == "\xc0\xa0 a");  // an overlong space
}

TEST_CASE("chat segments mark assistant turns and their end-of-turn markers",
          "[unit][data][chat]") {
  using chat_test::flat;
  using P = std::vector<std::pair<std::string, bool>>;
  const Conversation c = {{"system", "S"},
                          {"user", " U "},
                          {"assistant", " A\xe3\x80\x80"},
                          {"user", "V"},
                          {"assistant", ""}};
  const ChatSpecialTokens tokens{"<s>", "</s>"};
  CHECK(flat(render_chat(c, ChatFormat::Llama3, tokens, true)) ==
        P{{"<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           false},
          {"A<|eot_id|>", true},
          {"<|start_header_id|>user<|end_header_id|>\n\nV<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           false},
          {"<|eot_id|>", true},
          {"<|start_header_id|>assistant<|end_header_id|>\n\n", false}});
  CHECK(flat(render_chat(c, ChatFormat::ChatML, tokens, false)) ==
        P{{"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U <|im_end|>\n"
           "<|im_start|>assistant\n",
           false},
          {" A\xe3\x80\x80<|im_end|>", true},
          {"\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n", false},
          {"<|im_end|>", true},
          {"\n", false}});
  const Conversation m = {{"user", "U"}, {"assistant", " A "}, {"user", "V"}};
  // Mistral's template has no generation prompt: the user message ends with the cue.
  for (bool generation : {false, true}) {
    CHECK(flat(render_chat(m, ChatFormat::Mistral, tokens, generation)) ==
          P{{"<s>[INST] U [/INST]", false}, {" A </s>", true}, {"[INST] V [/INST]", false}});
  }
  CHECK(flat(render_chat(c, ChatFormat::Plain, tokens, true)) ==
        P{{"<s>### System:\nS\n\n### User:\n U \n\n### Assistant:\n", false},
          {" A\xe3\x80\x80</s>", true},
          {"\n\n### User:\nV\n\n### Assistant:\n", false},
          {"</s>", true},
          {"\n\n### Assistant:\n", false}});
  // Plain without a bos token writes none.
  CHECK(render_chat_text({{"user", "q"}, {"assistant", "a"}},
                         ChatTemplate{ChatFormat::Plain, {"", "<|endoftext|>"}, {}, {}},
                         false) == "### User:\nq\n\n### Assistant:\na<|endoftext|>");
}

TEST_CASE("chat renders refuse what the templates refuse", "[unit][data][chat]") {
  const ChatSpecialTokens tokens{"<s>", "</s>"};
  auto refusal = [&](const Conversation& c, ChatFormat format) {
    try {
      render_chat(c, format, tokens, false);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Mistral: roles alternate from a user message; no system message anywhere.
  CHECK_THAT(refusal({{"system", "s"}, {"user", "u"}}, ChatFormat::Mistral),
             Catch::StartsWith("the mistral chat format refuses message 0 (system): roles must "
                               "alternate"));
  CHECK_THAT(refusal({{"user", "u"}, {"system", "s"}}, ChatFormat::Mistral),
             Catch::StartsWith("the mistral chat format refuses message 1 (system): only user "
                               "and assistant"));
  CHECK_THAT(refusal({{"user", "u"}, {"user", "v"}}, ChatFormat::Mistral),
             Catch::Contains("refuses message 1 (user): roles must alternate"));
  CHECK_THAT(refusal({{"assistant", "a"}}, ChatFormat::Mistral),
             Catch::Contains("refuses message 0 (assistant)"));
  CHECK(refusal({{"user", "u"}, {"assistant", "a"}}, ChatFormat::Mistral) == "no error");
  // The other formats take any order of the three roles.
  for (ChatFormat format : {ChatFormat::Llama3, ChatFormat::ChatML, ChatFormat::Plain}) {
    CHECK(refusal({{"assistant", "a"}, {"system", "s"}, {"user", "u"}, {"user", "v"}}, format) ==
          "no error");
    CHECK_THAT(refusal({}, format), Catch::Contains("an empty conversation"));
    CHECK_THAT(refusal({{"user", "u"}, {"tool", "t"}}, format),
               Catch::Contains("message 1 has the role \"tool\""));
  }
  // Tokens the template writes must exist.
  CHECK_THROWS_WITH(render_chat({{"user", "u"}}, ChatFormat::Llama3, {"", "</s>"}, false),
                    Catch::Contains("llama3 chat format writes the tokenizer's bos_token, and "
                                    "it has none"));
  CHECK_THROWS_WITH(render_chat({{"user", "u"}}, ChatFormat::Mistral, {"<s>", ""}, false),
                    Catch::Contains("eos_token"));
  CHECK_NOTHROW(render_chat({{"user", "u"}}, ChatFormat::ChatML, {}, false));
  ChatTemplate detected{ChatFormat::Mistral, tokens, {}, "Mixtral-8x7B-Instruct-v0.1"};
  CHECK_THROWS_WITH(render_chat({{"system", "s"}}, detected, false),
                    Catch::StartsWith("the mistral chat template (Mixtral-8x7B-Instruct-v0.1) "
                                      "refuses message 0"));
}
