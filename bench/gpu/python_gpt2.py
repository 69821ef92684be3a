"""Python PyTorch side of the GPU benchmark: the same GPT (bench/python/frugal_models.py, same
parameter names), loaded from frugal's exported .pt, trained with torch.autocast(bf16), fused
AdamW, clipping to 1.0, and optionally torch.utils.checkpoint on every block (POLICY full) or torch.compile
(POLICY compile). Also measures the
GPU's bf16 matmul rate, the denominator of MFU. Needs only torch (the GPU machine has no PyYAML).

Usage: python_gpt2.py MODEL_JSON WEIGHTS.pt POLICY STEPS BATCH [DEVICE]
DEVICE: cuda (default), or cpu for tools/gpu/check.sh's dry run (a smaller matmul for the rate,
no peak: the CPU has no allocator statistics).
Prints JSON: median_step_s, tokens_per_s, peak_bytes, matmul_tflops, n_params.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from frugal_models import Gpt, apply_checkpointing, decay_groups  # noqa: E402


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def matmul_tflops(device):
    n, reps = (8192, 30) if device == "cuda" else (512, 5)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(2):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e12


def main(model_json, weights, policy, steps, batch, device="cuda"):
    c = json.loads(model_json)
    torch.manual_seed(0)
    model = Gpt(c)
    model.load_state_dict(torch.load(weights, map_location="cpu"))
    model.to(device)
    if policy == "compile":
        model = torch.compile(model)
    else:
        apply_checkpointing(model, policy)
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=6e-4, fused=device == "cuda")
    T, V = c["block_size"], c["vocab_size"]
    times = []
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        seq = torch.randint(0, V, (batch, T + 1), device=device)
        x, y = seq[:, :T], seq[:, 1:]
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        times.append(time.perf_counter() - start)
    med = statistics.median(times[5:] if len(times) > 5 else times)
    print(json.dumps({"median_step_s": med, "tokens_per_s": batch * T / med,
                      "peak_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else 0,
                      "matmul_tflops": matmul_tflops(device),
                      "n_params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), *sys.argv[6:7])
