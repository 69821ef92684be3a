// The published chat templates frugal recognises in a Hugging Face folder (chat_detect.cpp),
// as their tokenizer_config.json files hold them (JSON-decoded), each with the C++ rendering
// that reproduces it (chat_render.cpp). tests/python/chat_template_reference.py renders the
// same strings with transformers, so that a copy that drifts fails the tests.
#pragma once

#include <string_view>
#include <vector>

#include "frugal/data/chat.h"

namespace frugal::chat_templates {

struct Published {
  const char* source;  // the models that publish it, for messages
  ChatFormat format;
  // The template, split where its default system prompt goes (one part: a template without
  // one). Any prompt may stand there: Qwen2-Instruct's template is SmolLM2-Instruct's with
  // "You are a helpful assistant.".
  std::vector<std::string_view> parts;
};

const std::vector<Published>& published();

}  // namespace frugal::chat_templates
