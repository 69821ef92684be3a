"""Checks files frugal wrote against what the C++ test says they hold.

usage: check_export.py PT SAFETENSORS EXPECTED_JSON [CHECKPOINT]

EXPECTED_JSON: [{"name", "dtype" (torch attribute name), "shape", "hex" (the values' bytes,
row-major, little-endian)}, ...] in the order written. PT must load with torch.load's default
(weights_only=True) as a plain dict in that order; SAFETENSORS with safetensors.torch.load_file;
CHECKPOINT (save_tensors bytes), when given, with zipfile (CRCs, seal comment) and torch.load.
Prints OK and exits 0 only when every name, dtype, shape and byte matches.
"""
import json
import sys
import zipfile

import torch
from safetensors.torch import load_file


def raw_hex(t: torch.Tensor) -> str:
    # view(uint8) reinterprets the bytes, so NaN payloads, -0.0 and bf16 compare exactly.
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex()


def compare(label, tensors, expected, check_order):
    errors = []
    names = [e["name"] for e in expected]
    if check_order and list(tensors) != names:
        errors.append(f"{label}: order {list(tensors)} != {names}")
    if set(tensors) != set(names):
        errors.append(f"{label}: names {sorted(tensors)} != {sorted(names)}")
    for e in expected:
        t = tensors.get(e["name"])
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            errors.append(f"{label}: {e['name']} is a {type(t).__name__}")
            continue
        if t.dtype != getattr(torch, e["dtype"]):
            errors.append(f"{label}: {e['name']} dtype {t.dtype} != {e['dtype']}")
        elif list(t.shape) != e["shape"]:
            errors.append(f"{label}: {e['name']} shape {list(t.shape)} != {e['shape']}")
        elif raw_hex(t) != e["hex"]:
            errors.append(f"{label}: {e['name']} values differ")
    return errors


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    pt_path, st_path, expected_path = sys.argv[1:4]
    with open(expected_path) as f:
        expected = json.load(f)

    errors = []
    pt = torch.load(pt_path)  # default weights_only=True: what a cautious user runs
    if type(pt) is not dict:
        errors.append(f"pt: a {type(pt).__name__}, not a dict")
    errors += compare("pt", pt, expected, check_order=True)
    errors += compare("safetensors", load_file(st_path), expected, check_order=False)

    if len(sys.argv) == 5:
        # The seal frugal appends as the zip comment must leave a valid zip (CRCs included).
        with zipfile.ZipFile(sys.argv[4]) as z:
            if z.testzip() is not None or not z.comment.startswith(b"frugal-fnv1a64:"):
                errors.append(f"checkpoint: bad zip (comment {z.comment!r})")
        ckpt = torch.load(sys.argv[4])
        if ckpt.get("format") != "frugal.tensors" or ckpt.get("names") != [
            e["name"] for e in expected
        ]:
            errors.append(f"checkpoint: unexpected layout {sorted(ckpt)}")
        else:
            errors += compare("checkpoint", ckpt["tensors"], expected, check_order=True)

    # Independent of the C++ side's own bytes: one tensor recomputed from its definition.
    ref = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.25 - 1
    if not torch.equal(pt.get("blocks.0.attn.qkv.weight", torch.empty(0)), ref):
        errors.append("pt: blocks.0.attn.qkv.weight is not arange(24).reshape(4, 6) * 0.25 - 1")

    for e in errors:
        print(e)
    if errors:
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
