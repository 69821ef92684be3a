// frugal's chat rendering against transformers' apply_chat_template
// (tests/python/chat_template_reference.py): 320 random conversations (system prompts, many
// turns, roles out of order, text in many scripts, emoji, combining marks, every character
// Python's str.strip() removes at both ends, empty contents), written in the three JSONL
// shapes, read with frugal's reader as the script means them, then rendered under each
// published template the script saved in a tokenizer folder, with and without the generation
// prompt: byte for byte the same text, and an error exactly where the template raises. The
// folders also check detection: each template is recognised from the folder as transformers
// reads it (a string, a list of named templates, chat_template.jinja; tokens as strings or
// objects), with its default system prompt and special tokens.
#include <catch2/catch.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frugal/data/chat.h"
#include "frugal/util/error.h"
#include "support/helpers.h"  // (not cli.h, whose model configs bring torch's headers: 32 s -> 8 s to compile)

using namespace frugal;
using nlohmann::json;

namespace chat_templates_test {

std::vector<json> read_json_lines(const std::filesystem::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// Where two renders part, for the message of a mismatch.
std::string first_difference(const std::string& ours, const std::string& theirs) {
  size_t at = 0;
  while (at < ours.size() && at < theirs.size() && ours[at] == theirs[at]) ++at;
  const size_t from = at < 20 ? 0 : at - 20;
  return "at byte " + std::to_string(at) + ": frugal " +
         json(ours.substr(from, 60)).dump(-1, ' ', false, json::error_handler_t::replace) +
         ", transformers " +
         json(theirs.substr(from, 60)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The assistant segments hold each assistant message's content (as the format writes it) and
// its end-of-turn marker, nothing else, and neighbours differ in kind.
bool segments_as_documented(const std::vector<ChatSegment>& segments,
                            const Conversation& conversation, const ChatTemplate& chat) {
  std::string expected, got;
  for (const ChatMessage& m : conversation) {
    if (m.role != "assistant") continue;
    switch (chat.format) {
      case ChatFormat::Llama3:
        expected += std::string(strip_unicode_whitespace(m.content)) + "<|eot_id|>";
        break;
      case ChatFormat::ChatML:
        expected += m.content + "<|im_end|>";
        break;
      default:
        expected += m.content + chat.tokens.eos;
        break;
    }
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].text.empty()) return false;
    if (i > 0 && segments[i].assistant == segments[i - 1].assistant) return false;
    if (segments[i].assistant) got += segments[i].text;
  }
  return got == expected;
}

}  // namespace chat_templates_test

TEST_CASE("chat renders equal transformers' apply_chat_template for each published template",
          "[integration][python][chat]") {
  using chat_templates_test::read_json_lines;
  test::TempDir dir("frugal-chat-templates");
  auto made = test::python_script("chat_template_reference.py", test::quote(dir.path().string()));
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);

  // The reader gives the messages the script means (alpaca's input after a blank line, ...).
  const std::vector<Conversation> conversations = read_chat_jsonl(dir / "conversations.jsonl");
  const std::vector<json> meant = read_json_lines(dir / "conversations_expected.jsonl");
  REQUIRE(conversations.size() == meant.size());
  REQUIRE(conversations.size() >= 200);
  for (size_t i = 0; i < conversations.size(); ++i) {
    INFO("conversation " << i);
    REQUIRE(conversations[i].size() == meant[i].size());
    for (size_t k = 0; k < conversations[i].size(); ++k) {
      CHECK(conversations[i][k].role == meant[i][k].at("role").get<std::string>());
      CHECK(conversations[i][k].content == meant[i][k].at("content").get<std::string>());
    }
  }

  const json variants = json::parse(test::read_text(dir / "variants.json"));
  REQUIRE(variants.size() == 8);
  for (const json& variant : variants) {
    const std::string name = variant.at("name").get<std::string>();
    INFO("template " << name);
    const ChatTemplate chat = detect_chat_template(dir / name);
    CHECK(chat_format_name(chat.format) == variant.at("format").get<std::string>());
    CHECK(chat.tokens.bos == variant.at("bos").get<std::string>());
    CHECK(chat.tokens.eos == variant.at("eos").get<std::string>());
    if (variant.at("default_system").is_null()) {
      CHECK_FALSE(chat.default_system);
    } else {
      REQUIRE(chat.default_system);
      CHECK(*chat.default_system == variant.at("default_system").get<std::string>());
    }

    const std::vector<json> expected = read_json_lines(dir / name / "expected.jsonl");
    REQUIRE(expected.size() == conversations.size());
    int identical = 0, refused = 0, wrong = 0;
    std::string first_wrong;
    for (size_t i = 0; i < conversations.size(); ++i) {
      for (bool generation : {false, true}) {
        std::string problem;
        try {
          const std::vector<ChatSegment> segments = render_chat(conversations[i], chat, generation);
          std::string text;
          for (const ChatSegment& s : segments) text += s.text;
          if (expected[i].contains("error")) {
            problem = "rendered what transformers refuses (" +
                      expected[i]["error"].get<std::string>() + ")";
          } else if (const std::string theirs =
                         expected[i].at(generation ? "generation" : "text").get<std::string>();
                     text != theirs) {
            problem = chat_templates_test::first_difference(text, theirs);
          } else if (!chat_templates_test::segments_as_documented(segments, conversations[i],
                                                                  chat)) {
            problem = "segments not as documented";
          } else {
            ++identical;
          }
        } catch (const Error& e) {
          if (expected[i].contains("error")) {
            ++refused;
          } else {
            problem = std::string("refused what transformers renders: ") + e.what();
          }
        }
        if (!problem.empty() && wrong++ == 0) {
          first_wrong = "conversation " + std::to_string(i) + (generation ? " with" : " without") +
                        " the generation prompt: " + problem;
        }
      }
    }
    std::cout << "chat template " << name << ": " << identical << " renders byte-identical, "
              << refused << " refused as transformers refuses them\n";
    INFO(first_wrong);
    CHECK(wrong == 0);
    CHECK(identical + refused == 2 * static_cast<int>(conversations.size()));
    CHECK(identical >= 300);  // Mistral's refusals leave more than half
  }
}
