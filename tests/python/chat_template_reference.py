"""Conversations, and how transformers renders them under the published chat templates frugal
recognises (tokenizer.apply_chat_template(messages, tokenize=False)), for frugal's chat
rendering (src/data/chat_render.cpp) to reproduce byte for byte.

Usage: chat_template_reference.py OUT_DIR
Writes:
- OUT_DIR/conversations.jsonl: the conversations (random, seed 7) in the three shapes frugal
  reads: {"messages": [...]}, {"prompt": ..., "completion": ...} (strings, or lists of messages
  as TRL's conversational datasets have them) and alpaca's {"instruction", "input", "output"};
  with system prompts, many turns, roles that do not alternate, text in many scripts, emoji,
  combining marks, special-token look-alikes, empty contents and contents wrapped in every
  character Python's str.strip() removes (and in look-alikes it keeps); some lines written with
  \\u escapes, some as raw UTF-8, with blank lines between some.
- OUT_DIR/conversations_expected.jsonl: each conversation as messages, the way frugal must read
  it (alpaca's user message: the instruction, then "\\n\\n" and the input when there is one).
- OUT_DIR/variants.json: one entry per template: {"name", "format", "source_has", "bos", "eos",
  "default_system"}.
- OUT_DIR/<name>/: a tokenizer folder written by save_pretrained (a tiny WordLevel tokenizer with
  the family's special tokens), its tokenizer_config.json then rewritten to hold the template
  the way published folders do (a string, a list of named templates, a chat_template.jinja file;
  special tokens as strings or as objects), and read back with from_pretrained, whose tokenizer
  renders; OUT_DIR/<name>/expected.jsonl: one line per conversation, {"text": RENDER,
  "generation": RENDER_WITH_GENERATION_PROMPT}, or {"error": MESSAGE} where the template raised.
Prints one JSON line with the counts.
"""
import json
import os
import random
import sys

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

# The templates as the published tokenizer_config.json files spell them (JSON string bodies,
# escapes and all), decoded with json.loads.
LLAMA3_JSON = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
# teknium/OpenHermes-2.5-Mistral-7B.
CHATML_JSON = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}")
# transformers' chat templating guide (dolphin-2.x, AutoTrain's default).
CHATML_GUIDE_JSON = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
    "{% endif %}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}")
# HuggingFaceTB/SmolLM2-*-Instruct; Qwen/Qwen2-*-Instruct has the same with another prompt.
SMOLLM2_JSON = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}")
# OpenHermes' template with its newlines written as Jinja escapes inside the quotes (copies of
# templates differ in that; Jinja reads both alike).
CHATML_ESCAPED_JSON = CHATML_JSON.replace("'\\n'", "'\\\\n'").replace("assistant\\n'",
                                                                       "assistant\\\\n'")
QWEN2_JSON = SMOLLM2_JSON.replace(
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
    "You are a helpful assistant.")
# Qwen/Qwen2.5-*-Instruct.
QWEN25_JSON = (
    "{%- if tools %}\\n    {{- '<|im_start|>system\\\\n' }}\\n    {%- if messages[0]['role'] == "
    "'system' %}\\n        {{- messages[0]['content'] }}\\n    {%- else %}\\n        {{- 'You "
    "are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\\n    {%- endif %}\\n "
    "   {{- \\\"\\\\n\\\\n# Tools\\\\n\\\\nYou may call one or more functions to assist with the "
    "user query.\\\\n\\\\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\\\\n<tools>\\\" }}\\n    {%- for tool in tools %}\\n        {{- \\\"\\\\n\\\" }}\\n  "
    "      {{- tool | tojson }}\\n    {%- endfor %}\\n    {{- \\\"\\\\n</tools>\\\\n\\\\nFor each "
    "function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\\\n<tool_call>\\\\n{\\\\\\\"name\\\\\\\": "
    "<function-name>, \\\\\\\"arguments\\\\\\\": <args-json-object>}\\\\n</tool_call>"
    "<|im_end|>\\\\n\\\" }}\\n{%- else %}\\n    {%- if messages[0]['role'] == 'system' %}\\n   "
    "     {{- '<|im_start|>system\\\\n' + messages[0]['content'] + '<|im_end|>\\\\n' }}\\n    "
    "{%- else %}\\n        {{- '<|im_start|>system\\\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\\\n' }}\\n    {%- endif %}\\n{%- endif %}\\n{%- for "
    "message in messages %}\\n    {%- if (message.role == \\\"user\\\") or (message.role == "
    "\\\"system\\\" and not loop.first) or (message.role == \\\"assistant\\\" and not "
    "message.tool_calls) %}\\n        {{- '<|im_start|>' + message.role + '\\\\n' + "
    "message.content + '<|im_end|>' + '\\\\n' }}\\n    {%- elif message.role == "
    "\\\"assistant\\\" %}\\n        {{- '<|im_start|>' + message.role }}\\n        {%- if "
    "message.content %}\\n            {{- '\\\\n' + message.content }}\\n        {%- endif %}\\n "
    "       {%- for tool_call in message.tool_calls %}\\n            {%- if tool_call.function "
    "is defined %}\\n                {%- set tool_call = tool_call.function %}\\n            "
    "{%- endif %}\\n            {{- '\\\\n<tool_call>\\\\n{\\\"name\\\": \\\"' }}\\n            "
    "{{- tool_call.name }}\\n            {{- '\\\", \\\"arguments\\\": ' }}\\n            {{- "
    "tool_call.arguments | tojson }}\\n            {{- '}\\\\n</tool_call>' }}\\n        {%- "
    "endfor %}\\n        {{- '<|im_end|>\\\\n' }}\\n    {%- elif message.role == \\\"tool\\\" "
    "%}\\n        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "
    "\\\"tool\\\") %}\\n            {{- '<|im_start|>user' }}\\n        {%- endif %}\\n        "
    "{{- '\\\\n<tool_response>\\\\n' }}\\n        {{- message.content }}\\n        {{- "
    "'\\\\n</tool_response>' }}\\n        {%- if loop.last or (messages[loop.index0 + 1].role "
    "!= \\\"tool\\\") %}\\n            {{- '<|im_end|>\\\\n' }}\\n        {%- endif %}\\n    "
    "{%- endif %}\\n{%- endfor %}\\n{%- if add_generation_prompt %}\\n    {{- "
    "'<|im_start|>assistant\\\\n' }}\\n{%- endif %}\\n")
# mistralai/Mixtral-8x7B-Instruct-v0.1 (and Mistral-7B-Instruct-v0.2 before its system-prompt
# revision).
MISTRAL_JSON = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}")


def decoded(body):
    return json.loads('"' + body + '"')


def token_object(content):
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False, "special": True}


# name, frugal's format, template, bos, eos, the template's default system prompt, and where
# the folder keeps the template ("string", "list": [{name, template}], "jinja":
# chat_template.jinja; "jinja_over_stale": that file, and a stale template in the config, which
# the file overrides) and its tokens ("string", "object").
VARIANTS = [
    ("llama3", "llama3", LLAMA3_JSON, "<|begin_of_text|>", "<|eot_id|>", None, "string",
     "string"),
    ("chatml", "chatml", CHATML_JSON, "<s>", "<|im_end|>", None, "list", "string"),
    ("chatml_escaped", "chatml", CHATML_ESCAPED_JSON, None, "<|im_end|>", None,
     "jinja_over_stale", "string"),
    ("chatml_guide", "chatml", CHATML_GUIDE_JSON, None, "<|im_end|>", None, "jinja", "string"),
    ("smollm2", "chatml", SMOLLM2_JSON, "<|im_start|>", "<|im_end|>",
     "You are a helpful AI assistant named SmolLM, trained by Hugging Face", "string",
     "object"),
    ("qwen2", "chatml", QWEN2_JSON, None, "<|im_end|>", "You are a helpful assistant.",
     "string", "string"),
    ("qwen2.5", "chatml", QWEN25_JSON, None, "<|im_end|>",
     "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "string",
     "string"),
    ("mistral", "mistral", MISTRAL_JSON, "<s>", "</s>", None, "string", "object"),
]

# Every code point str.isspace() holds (what Jinja's trim, str.strip(), removes at both ends),
# and look-alikes it keeps (zero-width space and joiner, BOM, Mongolian vowel separator, soft
# hyphen).
STRIPPED = [chr(c) for c in range(0x110000) if chr(c).isspace()]
KEPT = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u180e", "\u00ad"]
WORDS = ["hello", "world", "Größe", "naïve", "日本語のテキスト", "中文字符", "한국어", "العربية",
         "עברית", "русский", "Ελληνικά", "🙂", "👩\u200d👩\u200d👧\u200d👦", "👍🏽", "🇯🇵",
         "e\u0301", "a\u0308\u0323", "Z\u0324\u0354\u0367\u0311\u0313", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
         "<|im_end|>", "<|im_start|>user", "<|eot_id|>", "<|start_header_id|>", "[INST]",
         "[/INST]", "</s>", "<s>", "{{ x }}", "{% if y %}", "'single'", '"double"',
         "back\\slash", "tab\there", "line\nbreak", "crlf\r\n", "…", "—", "ﬁ", "123", "3.14",
         "\x00nul", "\x7fdel"]


def random_content(rng):
    r = rng.random()
    if r < 0.06:
        return ""
    if r < 0.12:  # only characters strip() removes
        return "".join(rng.choice(STRIPPED) for _ in range(rng.randint(1, 4)))
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 9))]
    seps = [rng.choice([" ", " ", " ", "\n", "\n\n", "\u3000", ", "]) for _ in words]
    body = "".join(w + s for w, s in zip(words, seps))[:-1] if words else ""
    if rng.random() < 0.2:
        body = rng.choice(KEPT) + body
    if rng.random() < 0.2:
        body = body + rng.choice(KEPT)

    def edge():
        pool = STRIPPED if rng.random() < 0.8 else STRIPPED + KEPT
        return "".join(rng.choice(pool) for _ in range(rng.choice([0, 0, 1, 1, 2, 3])))

    return edge() + body + edge()


def random_roles(rng):
    r = rng.random()
    if r < 0.6:  # alternating, user first, with or without a system prompt
        roles = ["system"] if rng.random() < 0.4 else []
        turns = rng.randint(1, 12)
        roles += ["user" if i % 2 == 0 else "assistant" for i in range(turns)]
        return roles
    if r < 0.8:  # anything, which some templates refuse
        return [rng.choice(["system", "user", "assistant"]) for _ in range(rng.randint(1, 8))]
    return ["user", "assistant"]


def sample(rng, i):
    """One conversation: (the JSON object written, the messages frugal must read)."""
    roles = random_roles(rng)
    messages = [{"role": role, "content": random_content(rng)} for role in roles]
    extra = {"id": i, "source": "frugal-test"} if rng.random() < 0.15 else {}
    r = rng.random()
    if roles == ["user", "assistant"]:
        if r < 0.35:
            return {"prompt": messages[0]["content"], "completion": messages[1]["content"],
                    **extra}, messages
        if r < 0.7:
            instruction = random_content(rng) or "Say something."
            given = random_content(rng) if rng.random() < 0.6 else ""
            user = instruction + "\n\n" + given if given else instruction
            row = {"instruction": instruction, "output": messages[1]["content"], **extra}
            if given or rng.random() < 0.5:
                row["input"] = given
            return row, [{"role": "user", "content": user}, messages[1]]
    if len(messages) >= 2 and roles[-1] == "assistant" and r < 0.12:
        return {"prompt": messages[:-1], "completion": messages[-1:], **extra}, messages
    return {"messages": messages, **extra}, messages


def write_folder(folder, variant):
    name, _, template_json, bos, eos, _, template_kind, token_kind = variant
    template = decoded(template_json)
    vocab = {"<unk>": 0}
    for token in (bos, eos):
        if token is not None:
            vocab.setdefault(token, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    kwargs = {"unk_token": "<unk>"}
    if bos is not None:
        kwargs["bos_token"] = bos
    kwargs["eos_token"] = eos
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(folder)
    # The folder as published ones hold it.
    config_path = os.path.join(folder, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    config.pop("chat_template", None)
    if template_kind.startswith("jinja"):
        with open(jinja, "w", encoding="utf-8", newline="") as f:
            f.write(template)
        if template_kind == "jinja_over_stale":
            config["chat_template"] = "{{ 'a template chat_template.jinja replaces' }}"
    elif template_kind == "list":
        config["chat_template"] = [{"name": "default", "template": template},
                                   {"name": "rag", "template": "{{ 'not this one' }}"}]
    else:
        config["chat_template"] = template
    config["bos_token"] = None if bos is None else (
        token_object(bos) if token_kind == "object" else bos)
    config["eos_token"] = token_object(eos) if token_kind == "object" else eos
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    reread = PreTrainedTokenizerFast.from_pretrained(folder)
    assert reread.get_chat_template() == template, name
    assert reread.bos_token == bos and reread.eos_token == eos, name
    return reread


def main(out):
    rng = random.Random(7)
    rows, conversations = [], []
    for i in range(320):
        row, messages = sample(rng, i)
        rows.append(row)
        conversations.append(messages)
    with open(os.path.join(out, "conversations.jsonl"), "w", encoding="utf-8", newline="") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps(row, ensure_ascii=(i % 3 == 0)) + "\n")
            if i % 17 == 5:
                f.write("\n" if i % 2 else "  \r\n")
    with open(os.path.join(out, "conversations_expected.jsonl"), "w", encoding="utf-8") as f:
        for messages in conversations:
            f.write(json.dumps(messages) + "\n")
    contents = [m["content"] for messages in conversations for m in messages]
    counts = {"conversations": len(conversations), "messages": len(contents),
              # contents whose ends str.strip() trims beyond ASCII whitespace
              "unicode_trimmed": sum(1 for c in contents if c.strip() != c.strip(" \t\n\r\v\f")),
              "empty": sum(1 for c in contents if not c)}
    manifest = []
    for variant in VARIANTS:
        name, fmt, _, bos, eos, default_system = variant[:6]
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        tokenizer = write_folder(folder, variant)
        rendered, refused = 0, 0
        with open(os.path.join(folder, "expected.jsonl"), "w", encoding="utf-8") as f:
            for messages in conversations:
                try:
                    line = {
                        "text": tokenizer.apply_chat_template(messages, tokenize=False),
                        "generation": tokenizer.apply_chat_template(
                            messages, tokenize=False, add_generation_prompt=True),
                    }
                    rendered += 1
                except Exception as e:  # the template's raise_exception (jinja2's TemplateError)
                    line = {"error": str(e)}
                    refused += 1
                f.write(json.dumps(line) + "\n")
        counts[name] = {"rendered": rendered, "refused": refused}
        manifest.append({"name": name, "format": fmt, "bos": bos or "", "eos": eos,
                         "default_system": default_system})
    with open(os.path.join(out, "variants.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
