// The published templates' text (chat_templates.h), JSON-decoded from the models'
// tokenizer_config.json files: the strings tests/python/chat_template_reference.py renders
// with transformers.
#include "chat_templates.h"

namespace frugal::chat_templates {

// clang-format off
const std::vector<Published>& published() {
  static const std::vector<Published> templates = {
  {"Meta-Llama-3-8B-Instruct", ChatFormat::Llama3,
   {
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set "
      "content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
      "\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% "
      "set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% "
      "if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
      "\n' }}{% endif %}"
   }},
  {"OpenHermes-2.5-Mistral-7B", ChatFormat::ChatML,
   {
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n"
      "' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
      "%}{{ '<|im_start|>assistant\n' }}{% endif %}"
   }},
  {"transformers' chat templating guide, dolphin-2.x", ChatFormat::ChatML,
   {
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt "
      "= false %}{% endif %}{% for message in messages %}{{'<|im_start|>' + message['role'] "
      "+ '\n' + message['content'] + '<|im_end|>' + '\n"
      "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
      "' }}{% endif %}"
   }},
  {"SmolLM2-Instruct, Qwen2-Instruct", ChatFormat::ChatML,
   {
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
      "'system' %}{{ '<|im_start|>system\n",
      "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
      "' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt "
      "%}{{ '<|im_start|>assistant\n' }}{% endif %}"
   }},
  {"Qwen2.5-Instruct", ChatFormat::ChatML,
   {
      "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n"
      "    {%- if messages[0]['role'] == 'system' %}\n"
      "        {{- messages[0]['content'] }}\n    {%- else %}\n"
      "        {{- '",
      "' }}\n    {%- endif %}\n    {{- \"\\n\\n# Tools\\n\\nYou may call one or "
      "more functions to assist with the user query.\\n\\nYou are provided with "
      "function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
      "    {%- for tool in tools %}\n        {{- \"\\n\" }}\n"
      "        {{- tool | tojson }}\n    {%- endfor %}\n"
      "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object "
      "with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>"
      "\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call>"
      "<|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' "
      "%}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' "
      "}}\n    {%- else %}\n        {{- '<|im_start|>system\\n",
      "<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n"
      "{%- for message in messages %}\n    {%- if (message.role == \"user\") or "
      "(message.role == \"system\" and not loop.first) or (message.role == \"assistant\" "
      "and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role "
      "+ '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
      "    {%- elif message.role == \"assistant\" %}\n"
      "        {{- '<|im_start|>' + message.role }}\n"
      "        {%- if message.content %}\n            {{- '\\n' + message.content "
      "}}\n        {%- endif %}\n        {%- for tool_call in message.tool_calls "
      "%}\n            {%- if tool_call.function is defined %}\n"
      "                {%- set tool_call = tool_call.function %}\n"
      "            {%- endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' "
      "}}\n            {{- tool_call.name }}\n            {{- '\", \"arguments\": "
      "' }}\n            {{- tool_call.arguments | tojson }}\n"
      "            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n"
      "        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n"
      "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "
      "\"tool\") %}\n            {{- '<|im_start|>user' }}\n"
      "        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n"
      "        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n"
      "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") "
      "%}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n"
      "    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
      "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
   }},
  {"Mixtral-8x7B-Instruct-v0.1, Mistral-7B-Instruct-v0.2", ChatFormat::Mistral,
   {
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') "
      "!= (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
      "alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] "
      "== 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] "
      "== 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only "
      "user and assistant roles are supported!') }}{% endif %}{% endfor %}"
   }},
  };
  return templates;
}
// clang-format on

}  // namespace frugal::chat_templates
