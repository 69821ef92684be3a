"""The plain PyTorch training loop frugal's trainer is measured against: the same model
(frugal's architecture and parameter names), batch, optimizer and clipping, from a resolved
frugal config (`frugal config show CFG`). Prints {"median_step_s": ..., "steps": N} as JSON.

Usage: python_loop.py RESOLVED.yaml THREADS [default|fused]
"default" is torch.optim.AdamW as a plain loop writes it (on CPU: the per-tensor path);
"fused" is AdamW(fused=True), the same ATen kernel frugal uses.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from frugal_models import Gpt, MlpNet, decay_groups  # noqa: E402


def main(path, threads, variant):
    cfg = yaml.safe_load(open(path))
    torch.set_num_threads(threads)
    torch.manual_seed(cfg["run"]["seed"])
    m, d, o, t = cfg["model"], cfg["data"], cfg["optim"], cfg["train"]
    batch = d["micro_batch_size"] * cfg["strategy"]["accumulation"]
    if m["type"] == "gpt":
        model = Gpt(m)
        seq = d["seq_len"] or m["block_size"]
        make = lambda: (torch.randint(0, m["vocab_size"], (batch, seq)),
                        torch.randint(0, m["vocab_size"], (batch, seq)))
    else:
        model = MlpNet(m["in_features"], m["hidden"], m["out_features"])
        make = lambda: (torch.randn(batch, m["in_features"]),
                        torch.randint(0, m["out_features"], (batch,)))
    groups = decay_groups(model, o["weight_decay"])
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                            fused=(variant == "fused"))
    params = [p for p in model.parameters()]
    times = []
    for step in range(t["max_steps"]):
        x, y = make()
        start = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum") / y.numel()
        loss.backward()
        loss_value = loss.item()  # what a loop that logs does each step
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(params, o["clip_grad_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    warm = min(5, len(times) // 4)
    print(json.dumps({"median_step_s": statistics.median(times[warm:]), "steps": len(times),
                      "last_loss": loss_value}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "default")
