"""Greedy generation by transformers, for frugal generate's tests and benchmark.

Usage:
  generate_reference.py make DIR PROMPT_IDS N
      Writes random tiny Llama and Qwen2 folders (save_pretrained, fp32, no end-of-text id) as
      DIR/llama and DIR/qwen2, and DIR/llama-eos: the Llama with generation_config.json's
      eos_token_id set to the 10th token its greedy continuation makes. Prints one JSON object:
      each folder's greedy continuation of PROMPT_IDS (comma-separated), N new tokens at most,
      by model.generate(do_sample=False) with its KV cache.
  generate_reference.py greedy FOLDER PROMPT_IDS N
      Prints the folder's greedy continuation (a JSON list of new ids).
"""
import json
import os
import shutil
import sys

import torch
from transformers import (AutoModelForCausalLM, GenerationConfig, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)


def greedy(folder, prompt, n):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n, min_new_tokens=0)
    return out[0, len(prompt):].tolist()


def save(model, folder, eos=None):
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=None,
                                               bos_token_id=None)
    model.save_pretrained(folder)


def make(out, prompt, n):
    torch.manual_seed(0)
    shape = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                 bos_token_id=None, eos_token_id=None, pad_token_id=None,
                 tie_word_embeddings=False)
    # Initialised wider than transformers' 0.02 so that the arg max is decided by clear
    # margins, not by float rounding.
    models = {"llama": LlamaForCausalLM(LlamaConfig(initializer_range=0.2, **shape)),
              "qwen2": Qwen2ForCausalLM(Qwen2Config(initializer_range=0.2, **shape))}
    result = {}
    for name, model in models.items():
        save(model, os.path.join(out, name))
        result[name] = greedy(os.path.join(out, name), prompt, n)
    stop = result["llama"][9]
    save(models["llama"], os.path.join(out, "llama-eos"), eos=stop)
    result["llama-eos"] = greedy(os.path.join(out, "llama-eos"), prompt, n)
    print(json.dumps(result))


def main(argv):
    command, path, prompt, n = argv[1], argv[2], [int(x) for x in argv[3].split(",")], int(argv[4])
    if command == "make":
        make(path, prompt, n)
    else:
        print(json.dumps(greedy(path, prompt, n)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
