"""Loads a .pt with torch.load and a .safetensors with the safetensors package, checks that
they hold identical tensors, and prints {name: {shape, dtype, sum, sumsq}} as JSON."""
import json
import sys

import torch
from safetensors.torch import load_file

pt = torch.load(sys.argv[1])  # weights_only=True by default: a plain dict of tensors
st = load_file(sys.argv[2])
if set(pt) != set(st):
    sys.exit(f"different names: {sorted(set(pt) ^ set(st))}")
out = {}
for name, t in pt.items():
    if not torch.equal(t, st[name]):
        sys.exit(f"{name}: .pt and safetensors differ")
    d = t.double()
    out[name] = {"shape": list(t.shape), "dtype": str(t.dtype),
                 "sum": d.sum().item(), "sumsq": (d * d).sum().item()}
print(json.dumps(out))
