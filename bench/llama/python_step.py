"""The Python side of bench/llama: transformers' LlamaForCausalLM with the shapes of a resolved
frugal config (`frugal config show`), trained for the config's max_steps on random tokens the
way a plain Python loop does it, timed and measured like frugal's trainer
(bench/python/llama_bench.py).

Usage: python_step.py RESOLVED.yaml PRECISION POLICY THREADS LIBFRUGAL
  PRECISION fp32 | bf16-mixed (torch.autocast("cpu", bfloat16), fp32 weights and AdamW)
  POLICY    none | full (model.activation_checkpointing_enable, use_reentrant=False)
Prints {"step_s": [...], "peak_bytes": [...], "baseline_bytes": [...], "rss_peak_bytes": [...],
"losses": [...], "attn_implementation": ..., "parameters": ...} as JSON, one entry per step.
"""
import json
import os
import sys

import torch
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from llama_bench import adamw, build_llama, checkpoint_layers, tracking_allocator, train  # noqa: E402


def main(cfg_path, precision, policy, threads, lib_path):
    lib = tracking_allocator(lib_path)
    torch.set_num_threads(threads)
    cfg = yaml.safe_load(open(cfg_path))
    assert cfg["model"]["type"] == "llama"
    cfg["strategy"]["precision"] = precision
    torch.manual_seed(cfg["run"]["seed"])
    model = build_llama(cfg["model"])
    checkpoint_layers(model, policy)
    opt = adamw(model.parameters(), cfg["optim"])  # the tied embedding once
    out = train(model, opt, cfg, lib)
    out["attn_implementation"] = model.config._attn_implementation
    out["parameters"] = sum(p.numel() for p in model.parameters())
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
