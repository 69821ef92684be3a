"""torchao's NF4 (QLoRA) quantization of seeded tensors, for tests/unit/test_nf4.cpp.

Usage: nf4_reference.py OUT_DIR

Writes OUT_DIR/nf4.safetensors: per case <case>.input, and torchao's (to_nf4, block 64, scaler
block 256) <case>.codes (quantized_data), <case>.scaler_codes (quantized_scalers),
<case>.factors (quantization_factor), <case>.mean (scaler_mean), <case>.dequant
(get_original_weight()) and <case>.dequant_f32 (.to(torch.float32)); for the linear cases
<case>.x, <case>.grad_y, and linear_nf4's <case>.y and <case>.grad_x (with <case>.y_autocast,
<case>.grad_x_autocast under CPU autocast to bf16). Prints one JSON line: the cases and, per
case, how many values tie between two levels and how many blocks are all zeros.
Exits with 3 when torchao is not installed (the test skips).
"""

import json
import os
import sys

import torch

try:
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4, to_nf4
except ImportError as e:  # the test skips
    print(f"torchao is not installed: {e}")
    sys.exit(3)
from safetensors.torch import save_file


def ties(t: torch.Tensor, nf4) -> int:
    """Values whose two nearest levels are equally near (torchao takes the lower index)."""
    flat = t.flatten().view(-1, 64)
    scaled = (flat / flat.abs().max(dim=1, keepdim=True).values).flatten()
    d = (scaled.unsqueeze(-1) - nf4.nf4).abs()
    best = d.min(dim=-1).values.unsqueeze(-1)
    return int(((d == best).sum(dim=-1) > 1).sum())


def cases():
    g = torch.Generator().manual_seed(1234)
    out = {}
    out["f32_64x256"] = torch.randn(64, 256, generator=g)
    out["bf16_128x512"] = torch.randn(128, 512, generator=g).to(torch.bfloat16)
    out["f32_256x1024"] = torch.randn(256, 1024, generator=g) * 0.02
    out["f16_64x256"] = (torch.randn(64, 256, generator=g) * 0.05).to(torch.float16)
    # Large outliers: a few values 100-1000 times the rest, in fp32 and bf16.
    o = torch.randn(128, 512, generator=g) * 0.02
    idx = torch.randint(0, o.numel(), (40,), generator=g)
    o.view(-1)[idx] = torch.randn(40, generator=g) * 20
    out["f32_outliers_128x512"] = o
    out["bf16_outliers_128x512"] = o.to(torch.bfloat16)
    # Exact zeros and ties: whole zero blocks (0/0 is NaN inside torchao: such a block takes
    # index 0, the level -1), zeros among other values, and blocks whose absmax is 1 and
    # whose other values lie halfway between two adjacent levels (and on the levels).
    z = torch.randn(128, 512, generator=g)
    flat = z.view(-1, 64)
    flat[3] = 0
    flat[100:140] = 0
    flat[7, ::3] = 0
    lv = torch.tensor([-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
                       0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0])
    mids = (lv[:-1] + lv[1:]) / 2
    for b in range(200, 260):
        row = torch.cat([mids, lv, mids, lv[:-2] * 0.5, mids[:4]]).clone()
        row[0] = 1.0
        # Powers of two keep the ties exact; other factors move them by a rounding.
        flat[b] = row * (2.0 ** ((b % 5) - 2) if b < 230 else 1 + (b - 230) * 0.37)
    out["f32_zeros_ties_128x512"] = z
    out["bf16_zeros_ties_128x512"] = z.to(torch.bfloat16)
    # All zeros: every centred absmax is 0, so the scale factor is 256 / 0 = inf.
    out["f32_all_zero_64x256"] = torch.zeros(64, 256)
    return out


def main():
    out_dir = sys.argv[1]
    torch.manual_seed(0)
    tensors = {}
    summary = {"cases": [], "ties": {}, "zero_blocks": {}}
    linear_cases = {"f32_64x256", "bf16_128x512", "f32_outliers_128x512"}
    g = torch.Generator().manual_seed(99)
    for name, w in cases().items():
        w = w.contiguous()
        nf4 = to_nf4(w)
        tensors[f"{name}.input"] = w
        tensors[f"{name}.codes"] = nf4.quantized_data
        tensors[f"{name}.scaler_codes"] = nf4.quantized_scalers
        tensors[f"{name}.factors"] = nf4.quantization_factor
        tensors[f"{name}.mean"] = nf4.scaler_mean
        tensors[f"{name}.dequant"] = nf4.get_original_weight()
        tensors[f"{name}.dequant_f32"] = nf4.to(torch.float32)
        summary["cases"].append(name)
        summary["ties"][name] = ties(w, nf4)
        summary["zero_blocks"][name] = int((w.view(-1, 64).abs().amax(dim=1) == 0).sum())
        if name in linear_cases:
            out_f, in_f = w.shape
            x = torch.randn(3, 5, in_f, generator=g).to(w.dtype).requires_grad_(True)
            grad_y = torch.randn(3, 5, out_f, generator=g).to(w.dtype)
            y = linear_nf4(x, nf4)
            (grad_x,) = torch.autograd.grad(y, x, grad_y)
            tensors[f"{name}.x"] = x.detach()
            tensors[f"{name}.grad_y"] = grad_y
            tensors[f"{name}.y"] = y.detach()
            tensors[f"{name}.grad_x"] = grad_x
            if w.dtype == torch.float32:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    y = linear_nf4(x, nf4)
                (grad_x,) = torch.autograd.grad(y, x, grad_y.to(y.dtype))
                tensors[f"{name}.y_autocast"] = y.detach()
                tensors[f"{name}.grad_x_autocast"] = grad_x
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, "nf4.safetensors"))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
