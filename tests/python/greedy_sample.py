"""Greedy continuation of a prompt by a Hugging Face folder, in transformers and tokenizers.

Usage: greedy_sample.py FOLDER PROMPT N
Encodes PROMPT with FOLDER/tokenizer.json, appends the arg-max token N times (fp32, the whole
sequence each time, as frugal's sampler does) and writes the decoded new tokens to stdout,
special tokens included, with no trailing newline.
"""
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM


def main(folder, prompt, n):
    tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tok.encode(prompt, add_special_tokens=False).ids
    start = len(ids)
    with torch.no_grad():
        for _ in range(int(n)):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    sys.stdout.write(tok.decode(ids[start:], skip_special_tokens=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
