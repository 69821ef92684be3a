"""torch.optim.Adam / AdamW (same wheel, default implementation) on the inputs of frugal's
CPU Adam test, for comparison.

Usage: cpu_adam_reference.py DIR
DIR/inputs.safetensors  p (initial parameters), g.<step> (the gradient of each step)
DIR/setup.json          {"steps", "lr", "betas", "eps", "weight_decay", "decoupled"}
Writes DIR/reference.safetensors with p (after all steps), exp_avg, exp_avg_sq.
"""
import json
import sys

import torch
from safetensors.torch import load_file, save_file


def main(d):
    s = json.load(open(f"{d}/setup.json"))
    t = load_file(f"{d}/inputs.safetensors")
    p = t["p"].clone().requires_grad_(True)
    cls = torch.optim.AdamW if s["decoupled"] else torch.optim.Adam
    opt = cls([p], lr=s["lr"], betas=tuple(s["betas"]), eps=s["eps"], weight_decay=s["weight_decay"])
    for i in range(s["steps"]):
        p.grad = t[f"g.{i}"].clone()
        opt.step()
    st = opt.state[p]
    save_file({"p": p.detach().contiguous(), "exp_avg": st["exp_avg"].contiguous(),
               "exp_avg_sq": st["exp_avg_sq"].contiguous()}, f"{d}/reference.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
