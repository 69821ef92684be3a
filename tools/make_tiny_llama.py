"""Makes a tiny Llama-family model folder, as transformers' save_pretrained writes one, to
try fine-tuning on a machine without downloads: config.json, model.safetensors (random
weights, transformers' names and initialisation) and a byte-level BPE tokenizer.json learned
from a text corpus (GPT-2's byte alphabet and pre-tokenizer pattern, <|endoftext|> as the
end-of-text token). Needs only the venv's torch and safetensors.

With --chat the folder is ready for instruction tuning: two more added special tokens,
<|im_start|> and <|im_end|> (ids right after <|endoftext|>, so the vocabulary grows by 2), a
ChatML chat template (OpenHermes-2.5's) in tokenizer_config.json, <|im_end|> as the eos token
(the end of an assistant turn, where generation stops) in tokenizer_config.json and config.json,
and a generation_config.json that stops at <|im_end|> or <|endoftext|>.

Usage: python3 tools/make_tiny_llama.py OUT_DIR [--corpus FILE_OR_DIR] [--vocab 1024] [--seed 1]
                                        [--chat]
"""
import argparse
import collections
import json
import os
import re
import sys

import torch
from safetensors.torch import save_file

# GPT-2's pre-tokenizer pattern, in Python's `re` (letters: [^\W\d_]; numbers: \d).
PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+|_+""")

# OpenHermes-2.5's ChatML template.
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                 "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CHAT_TOKENS = ["<|im_start|>", "<|im_end|>"]


def byte_alphabet():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 256
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(extra)
            extra += 1
    return table


def read_corpus(path, limit=400_000):
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, f) for f in os.listdir(path)
        if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(path, f)))
    text = ""
    for f in files:
        text += open(f, encoding="utf-8", errors="replace").read()
        if len(text) > limit:
            break
    return text[:limit]


def learn_bpe(text, vocab_size):
    table = byte_alphabet()
    words = collections.Counter(
        tuple(table[b] for b in piece.encode("utf-8")) for piece in PATTERN.findall(text))
    vocab = [table[b] for b in range(256)]
    merges = []
    while len(vocab) < vocab_size - 1:
        pairs = collections.Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        vocab.append(a + b)
        merged = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return vocab, merges


def tokenizer_json(vocab, merges, specials):
    """specials: the added special tokens, given ids from len(vocab) on."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": len(vocab) + i, "content": t, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False, "special": True}
                         for i, t in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges},
    }


def weights(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    normal = lambda *shape: torch.randn(*shape, generator=g) * 0.02
    w = {"model.embed_tokens.weight": normal(v, h), "model.norm.weight": torch.ones(h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": torch.ones(h),
                  p + "post_attention_layernorm.weight": torch.ones(h),
                  p + "self_attn.q_proj.weight": normal(h, h),
                  p + "self_attn.k_proj.weight": normal(kv, h),
                  p + "self_attn.v_proj.weight": normal(kv, h),
                  p + "self_attn.o_proj.weight": normal(h, h),
                  p + "mlp.gate_proj.weight": normal(inter, h),
                  p + "mlp.up_proj.weight": normal(inter, h),
                  p + "mlp.down_proj.weight": normal(h, inter)})
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chat", action="store_true",
                    help="add <|im_start|>/<|im_end|> and a ChatML chat template")
    a = ap.parse_args()
    if os.path.exists(a.out):
        print(f"make_tiny_llama: '{a.out}' already exists; remove it first", file=sys.stderr)
        return 2
    vocab, merges = learn_bpe(read_corpus(a.corpus), a.vocab)
    specials = ["<|endoftext|>"] + (CHAT_TOKENS if a.chat else [])
    ids = {t: len(vocab) + i for i, t in enumerate(specials)}
    eos = "<|im_end|>" if a.chat else "<|endoftext|>"
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "vocab_size": len(vocab) + len(specials), "hidden_size": 128, "intermediate_size": 352,
           "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 32, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
           "mlp_bias": False, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
           "bos_token_id": None, "eos_token_id": ids[eos], "dtype": "float32"}
    os.makedirs(a.out)
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    save_file(weights(cfg, a.seed), os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    json.dump(tokenizer_json(vocab, merges, specials),
              open(os.path.join(a.out, "tokenizer.json"), "w"))
    tok_cfg = {"eos_token": eos, "model_max_length": 256}
    if a.chat:
        tok_cfg["chat_template"] = CHAT_TEMPLATE
        json.dump({"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "bos_token_id": None},
                  open(os.path.join(a.out, "generation_config.json"), "w"), indent=2)
    json.dump(tok_cfg, open(os.path.join(a.out, "tokenizer_config.json"), "w"))
    print(f"wrote {a.out}: vocabulary {cfg['vocab_size']}, "
          f"{sum(t.numel() for t in weights(cfg, a.seed).values()) / 1e6:.2f}M parameters"
          + (f"; chat tokens {', '.join(f'{t}={ids[t]}' for t in CHAT_TOKENS)}" if a.chat else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
