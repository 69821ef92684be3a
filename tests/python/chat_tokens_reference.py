"""transformers' token ids of chat conversations: apply_chat_template(tokenize=True).

Usage: chat_tokens_reference.py FOLDER DATA.jsonl N
Prints one JSON list: for each of the first N lines of DATA.jsonl that hold "messages", the ids
FOLDER's tokenizer and chat template give (no generation prompt).
"""
import json
import sys

from transformers import AutoTokenizer


def main(folder, data, n):
    tok = AutoTokenizer.from_pretrained(folder)
    out = []
    for line in open(data, encoding="utf-8"):
        row = json.loads(line)
        if "messages" in row and len(out) < int(n):
            ids = tok.apply_chat_template(row["messages"], tokenize=True, return_dict=False)
            out.append(list(ids))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
