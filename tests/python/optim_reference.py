"""Replays frugal's optimizer test run in Python PyTorch (same wheel) and compares.

Usage: optim_reference.py RUN_DIR
RUN_DIR/setup.json        the optimizer, schedule and clipping settings, step count
RUN_DIR/initial.safetensors  the MLP's initial parameters (frugal names)
RUN_DIR/batches.safetensors  x.<i>, y.<i> for each step
RUN_DIR/final.safetensors    frugal's parameters after the steps
Prints one JSON line {"max_rel_diff": ..., "losses": [...]} and exits 1 if the trajectories
differ by more than the tolerance given in setup.json.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def lr_at(s, step, base, max_steps):
    warm = s["warmup_steps"]
    if step < warm:
        return base * (step + 1) / warm
    decay = s["decay_steps"] or max(1, max_steps - warm)
    p = min(max((step - warm) / decay, 0.0), 1.0)
    if s["type"] == "cosine":
        return s["min_lr"] + (base - s["min_lr"]) * 0.5 * (1 + math.cos(math.pi * p))
    if s["type"] == "linear":
        return base + (s["min_lr"] - base) * p
    if s["type"] == "step":
        return base * s["gamma"] ** (step // max(1, s["step_size"]))
    return base


def forward(params, x):
    h = x
    i = 0
    while f"layers.{i}.weight" in params:
        h = torch.relu(F.linear(h, params[f"layers.{i}.weight"], params[f"layers.{i}.bias"]))
        i += 1
    return F.linear(h, params["head.weight"], params["head.bias"])


def main(run_dir):
    setup = json.load(open(f"{run_dir}/setup.json"))
    params = {k: v.clone().requires_grad_(True) for k, v in load_file(f"{run_dir}/initial.safetensors").items()}
    order = setup["param_order"]
    batches = load_file(f"{run_dir}/batches.safetensors")
    final = load_file(f"{run_dir}/final.safetensors")
    o = setup["optim"]
    decay = [params[n] for n in order if params[n].dim() >= 2]
    no_decay = [params[n] for n in order if params[n].dim() < 2]
    groups = [{"params": decay, "weight_decay": o["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    if o["type"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], foreach=False)
    elif o["type"] == "adam":
        opt = torch.optim.Adam(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], foreach=False)
    else:
        opt = torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"], foreach=False)
    losses = []
    for step in range(setup["steps"]):
        x, y = batches[f"x.{step}"], batches[f"y.{step}"]
        loss = F.cross_entropy(forward(params, x), y, reduction="sum") / y.numel()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_([params[n] for n in order], o["clip_grad_norm"], foreach=False)
        for g in opt.param_groups:
            g["lr"] = lr_at(setup["schedule"], step, o["lr"], setup["steps"])
        opt.step()
    worst = 0.0
    for n in order:
        ref = params[n].detach()
        worst = max(worst, ((final[n] - ref).abs().max() / (ref.abs().max() + 1e-12)).item())
    print(json.dumps({"max_rel_diff": worst, "losses": losses}))
    return 0 if worst <= setup["tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
