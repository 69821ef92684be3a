"""Loads a folder `frugal export --format hf` wrote with transformers' AutoModelForCausalLM and
compares its logits with frugal's.

Usage: check_hf_export.py FOLDER LOGITS.safetensors
LOGITS.safetensors holds x (int64, B x T) and logits (frugal's, fp32). Prints one JSON line
{"architecture", "max_abs_diff", "missing", "unexpected", "shards", "bos_token_id",
"eos_token_id"} (the last two as transformers' generate reads them); exits 1 if any weight is
missing or unexpected, or the logits differ by more than 1e-5.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main(folder, logits_file):
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True,
                                                       dtype=torch.float32)
    model.eval()
    ref = load_file(logits_file)
    with torch.no_grad():
        logits = model(input_ids=ref["x"]).logits
    diff = (logits - ref["logits"]).abs().max().item()
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    missing = [k for k in info["missing_keys"]]
    unexpected = [k for k in info["unexpected_keys"]]
    print(json.dumps({"architecture": type(model).__name__, "max_abs_diff": diff,
                      "missing": missing, "unexpected": unexpected, "shards": shards,
                      "bos_token_id": model.generation_config.bos_token_id,
                      "eos_token_id": model.generation_config.eos_token_id}))
    return 0 if diff <= 1e-5 and not missing and not unexpected else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
