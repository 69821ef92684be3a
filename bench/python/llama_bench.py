"""What the Python sides of bench/llama and bench/peft share: frugal's tracking CPU allocator
loaded into this process, the peak resident set, transformers' LlamaForCausalLM with the shapes
of a resolved frugal config (`frugal config show`), frugal's AdamW grouping, and the measured
training loop.

Memory, as frugal's trainer measures its own process: frugal's tracking CPU allocator (loaded
from libfrugal.so and installed before the model exists, so every tensor byte goes through the
same counter) gives the bytes live before each step and their peak during it; the peak resident
set (VmHWM) is read after each step, as frugal's metrics.jsonl records it.
"""
import ctypes
import time

import torch
import torch.nn.functional as F


def tracking_allocator(lib_path):
    """Loads libfrugal.so and installs its tracking CPU allocator; call before any tensor."""
    lib = ctypes.CDLL(lib_path)
    lib.frugal_cpu_current_bytes.restype = ctypes.c_int64
    lib.frugal_cpu_peak_bytes.restype = ctypes.c_int64
    lib.frugal_install_cpu_tracking()
    return lib


def vm_hwm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def build_llama(m):
    """LlamaForCausalLM with the resolved config's model section `m`, transformers' random
    initialisation (N(0, 0.02): time and memory do not depend on the values), fp32 weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=m["vocab_size"], hidden_size=m["n_embd"],
                      intermediate_size=m["intermediate_size"], num_hidden_layers=m["n_layer"],
                      num_attention_heads=m["n_head"], num_key_value_heads=m["n_kv_head"],
                      max_position_embeddings=m["block_size"], rms_norm_eps=m["rms_norm_eps"],
                      rope_theta=m["rope_theta"], tie_word_embeddings=m["tie_embeddings"],
                      attention_bias=m["qkv_bias"],
                      # A training loop keeps no KV cache (transformers' default is to build
                      # one, which would hold every layer's keys and values).
                      use_cache=False)
    # sdpa is transformers' default; named so that the table says what ran.
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa")
    # The weights (and AdamW state) stay fp32 under bf16-mixed, as frugal's.
    assert all(p.dtype == torch.float32 for p in model.parameters())
    model.train()
    return model


def checkpoint_layers(model, policy):
    """frugal's `full` policy: every decoder layer, non-reentrant."""
    if policy == "full":
        # (gradient_checkpointing_enable's new name in transformers 5; every decoder layer)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    elif policy != "none":
        raise SystemExit(f"checkpointing policy {policy}: only none and full")


def adamw(params, o):
    """frugal's AdamW over the trainable `params`: decay on matrices only; torch's fused kernel,
    as frugal's CPU AdamW is (the faster of torch's AdamW paths on a CPU, docs/benchmarks.md
    "CPU Adam")."""
    params = [p for p in params if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": o["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], fused=True)


def forward_loss(model, x, y, V, autocast_dtype):
    # A function of its own, so that the logits are not kept alive into the next step.
    with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        logits = model(input_ids=x).logits
        # frugal's loss: the sum over targets divided by their count, under the autocast.
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="sum") / y.numel()


def train(model, opt, cfg, lib):
    """The config's max_steps of forward, loss, backward, the loss read back, clipping (when
    optim.clip_grad_norm > 0), AdamW and zeroing, on random tokens made outside the timed region
    (as frugal's loader runs before its step). Returns per-step lists: step_s, peak_bytes,
    baseline_bytes, rss_peak_bytes, losses."""
    m, d, o = cfg["model"], cfg["data"], cfg["optim"]
    assert cfg["strategy"]["accumulation"] == 1
    autocast_dtype = {"fp32": None, "bf16-mixed": torch.bfloat16}[cfg["strategy"]["precision"]]
    params = [p for p in model.parameters() if p.requires_grad]
    B, T, V = d["micro_batch_size"], d["seq_len"] or m["block_size"], m["vocab_size"]
    g = torch.Generator().manual_seed(0)
    out = {"step_s": [], "peak_bytes": [], "baseline_bytes": [], "rss_peak_bytes": [], "losses": []}
    for _ in range(cfg["train"]["max_steps"]):
        seq = torch.randint(0, V, (B, T + 1), generator=g)
        x, y = seq[:, :T].contiguous(), seq[:, 1:].contiguous()
        out["baseline_bytes"].append(lib.frugal_cpu_current_bytes())
        lib.frugal_reset_cpu_peak()
        start = time.perf_counter()
        loss = forward_loss(model, x, y, V, autocast_dtype)
        loss.backward()
        out["losses"].append(loss.item())
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(params, o["clip_grad_norm"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        out["step_s"].append(time.perf_counter() - start)
        out["peak_bytes"].append(lib.frugal_cpu_peak_bytes())
        out["rss_peak_bytes"].append(vm_hwm_bytes())
    return out
