"""transformers' side of `frugal eval`: the mean next-token loss of a Hugging Face folder over a
nanoGPT token file (raw little-endian uint16), in the same sliding windows: windows of at most
SEQ_LEN tokens every STRIDE tokens, each token from the second on predicted once, in the first
window that reaches it (the labels of tokens an earlier window predicted are -100).

Usage: window_eval_reference.py FOLDER TOKENS.bin SEQ_LEN STRIDE
Prints one JSON line {"mean_loss", "predicted", "windows"}.
"""
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


def main(folder, tokens, seq_len, stride):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    ids = torch.from_numpy(np.fromfile(tokens, dtype="<u2").astype(np.int64))
    n = ids.numel()
    total, predicted, windows, scored_to, begin = 0.0, 0, 0, 0, 0
    with torch.no_grad():
        while scored_to < n - 1:
            end = min(begin + seq_len, n)
            x = ids[begin:end - 1].unsqueeze(0)
            y = ids[begin + 1:end].clone().unsqueeze(0)
            seen = max(0, scored_to - begin)
            y[:, :seen] = -100
            logits = model(input_ids=x).logits
            total += F.cross_entropy(logits.reshape(-1, logits.size(-1)).double(), y.reshape(-1),
                                     ignore_index=-100, reduction="sum").item()
            predicted += (end - 1) - scored_to
            scored_to = end - 1
            windows += 1
            begin += stride
    print(json.dumps({"mean_loss": total / predicted, "predicted": predicted, "windows": windows}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
