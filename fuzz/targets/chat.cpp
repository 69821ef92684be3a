// A chat JSONL line (data.type: chat): parse_chat_line's three shapes, the JSON types of every
// field, the roles; a conversation that reads is then rendered by every chat format, with and
// without a generation prompt, and each render's segments must join to its text and never be
// empty (what labels are cut from).
#include "frugal/data/chat.h"

#include <string>

#include "fuzz_input.h"

FRUGAL_FUZZ_ENTRY(chat) {
  return frugal::fuzz::expect_frugal_errors_only([&] {
    const frugal::Conversation conversation =
        frugal::parse_chat_line(frugal::fuzz::as_text(data, size), "fuzz.jsonl", 1);
    const frugal::ChatSpecialTokens tokens{"<s>", "</s>"};
    for (const frugal::ChatFormat format :
         {frugal::ChatFormat::Llama3, frugal::ChatFormat::ChatML, frugal::ChatFormat::Mistral,
          frugal::ChatFormat::Plain}) {
      for (const bool prompt : {false, true}) {
        try {
          for (const frugal::ChatSegment& s :
               frugal::render_chat(conversation, format, tokens, prompt)) {
            if (s.text.empty()) throw std::logic_error("render_chat: an empty segment");
          }
        } catch (const frugal::Error& e) {
          // A conversation a template refuses: one line, as any reader's error.
          if (!frugal::fuzz::is_one_line(e.what())) throw std::logic_error(e.what());
        }
      }
    }
  });
}
