"""Replays frugal's GradScaler test in Python with torch.amp.GradScaler("cpu").

Usage: grad_scaler_reference.py DIR
DIR/setup.json            scaler options and step count
DIR/grads.safetensors     g.<step>.<param>: the unscaled gradient of each step (inf/NaN planted)
DIR/initial.safetensors   the parameters before the first step
Prints {"scales": [...], "skipped": [...], "params": {name: [values]}} as JSON: the scale
after each update(), whether each step was skipped, and the final parameters.
"""
import json
import sys

import torch
from safetensors.torch import load_file


def main(d):
    setup = json.load(open(f"{d}/setup.json"))
    grads = load_file(f"{d}/grads.safetensors")
    params = {k: v.clone().requires_grad_(True) for k, v in load_file(f"{d}/initial.safetensors").items()}
    names = setup["names"]
    opt = torch.optim.SGD([params[n] for n in names], lr=setup["lr"])
    o = setup["scaler"]
    scaler = torch.amp.GradScaler("cpu", init_scale=o["init_scale"], growth_factor=o["growth_factor"],
                                  backoff_factor=o["backoff_factor"], growth_interval=o["growth_interval"])
    scales, skipped = [], []
    for step in range(setup["steps"]):
        # The gradient a scaled backward would produce: the true gradient times the scale.
        s = scaler.scale(torch.ones(())).item()  # what scaling the loss would multiply by
        for n in names:
            params[n].grad = grads[f"g.{step}.{n}"] * s
        scaler.unscale_(opt)
        before = [params[n].detach().clone() for n in names]
        scaler.step(opt)
        skipped.append(all(torch.equal(b, params[n].detach()) for b, n in zip(before, names)))
        scaler.update()
        scales.append(scaler.get_scale())
    print(json.dumps({"scales": scales, "skipped": skipped,
                      "params": {n: params[n].detach().flatten().tolist() for n in names}}))


if __name__ == "__main__":
    main(sys.argv[1])
