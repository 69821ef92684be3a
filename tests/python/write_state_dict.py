"""Writes what a Python user hands to frugal: torch.save of a module's state_dict.

usage: write_state_dict.py PLAIN.pt ORDERED.pt

PLAIN.pt holds dict(state_dict) (readable by frugal::io::load_tensors); ORDERED.pt the
state_dict itself, an OrderedDict carrying a _metadata attribute, which torch's C++ unpickler
cannot rebuild (frugal reports it as an error).

The module is nn.Sequential(Linear(3, 4), LayerNorm(4)) with its parameters set to arange-based
values, so the C++ side can rebuild the expected tensors without Python.
"""
import sys

import torch

model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
with torch.no_grad():
    for i, p in enumerate(model.parameters()):
        p.copy_(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) + 100 * i)
torch.save(dict(model.state_dict()), sys.argv[1])
torch.save(model.state_dict(), sys.argv[2])
print("OK")
