"""Python PyTorch doing what one frugal strategy combination does, measured with the same
tracking allocator (frugal's, loaded from libfrugal.so into this process).

Usage: python_step.py RESOLVED.yaml PRECISION POLICY WEIGHTS.safetensors THREADS LIBFRUGAL
WEIGHTS "-": the model's own initialisation (memory and time do not depend on the values).
optim.clip_grad_norm 0: no clipping, as in frugal. Prints {"median_step_s", "peak_bytes",
"baseline_bytes", "losses", "param_bytes", "grad_bytes", "state_bytes"} as JSON (the last three:
the bytes of the parameters, of their gradients at the end of a backward, of AdamW's state).
"""
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import yaml
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from frugal_models import Gpt, apply_checkpointing, decay_groups  # noqa: E402


def forward_loss(model, x, y, dtype, V):
    # A function of its own, so that the logits are not kept alive by a loop variable into the
    # next step (they would count in its baseline and its peak: 786 MiB at GPT-2 124M, B 8).
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="sum") / y.numel()


def main(cfg_path, precision, policy, weights, threads, lib_path):
    lib = ctypes.CDLL(lib_path)
    lib.frugal_cpu_current_bytes.restype = ctypes.c_int64
    lib.frugal_cpu_peak_bytes.restype = ctypes.c_int64
    lib.frugal_install_cpu_tracking()
    torch.set_num_threads(threads)
    cfg = yaml.safe_load(open(cfg_path))
    m, d, o, s = cfg["model"], cfg["data"], cfg["optim"], cfg["strategy"]
    torch.manual_seed(1)
    model = Gpt(m)
    if weights != "-":
        model.load_state_dict(load_file(weights))
    apply_checkpointing(model, policy, s["checkpointing"]["k"], s["checkpointing"]["targets"])
    opt = torch.optim.AdamW(decay_groups(model, o["weight_decay"]), lr=o["lr"], betas=tuple(o["betas"]),
                            eps=o["eps"], fused=True)
    dtype = {"bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16-mixed")
    B, T, V = d["micro_batch_size"], m["block_size"], m["vocab_size"]
    g = torch.Generator().manual_seed(0)
    times, peaks, baselines, losses = [], [], [], []
    for step in range(cfg["train"]["max_steps"]):
        seq = torch.randint(0, V, (B, T + 1), generator=g)
        x, y = seq[:, :T].contiguous(), seq[:, 1:].contiguous()
        baselines.append(lib.frugal_cpu_current_bytes())
        lib.frugal_reset_cpu_peak()
        start = time.perf_counter()
        loss = forward_loss(model, x, y, dtype, V)
        scaler.scale(loss).backward()
        losses.append(loss.item())
        grad_bytes = sum(p.grad.nbytes for p in model.parameters() if p.grad is not None)
        scaler.unscale_(opt)
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o["clip_grad_norm"])
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        peaks.append(lib.frugal_cpu_peak_bytes())
    warm = 2
    print(json.dumps({"median_step_s": statistics.median(times[warm:]), "peak_bytes": max(peaks[warm:]),
                      "baseline_bytes": min(baselines[warm:]), "losses": losses,
                      "param_bytes": sum(p.nbytes for p in model.parameters()),
                      "grad_bytes": grad_bytes,
                      "state_bytes": sum(t.nbytes for st in opt.state.values() for t in st.values()
                                         if torch.is_tensor(t))}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
