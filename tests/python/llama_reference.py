"""A small random Llama or Qwen2 built by transformers, and what frugal must reproduce.

Usage: llama_reference.py OUT_DIR llama|qwen2
Writes, under OUT_DIR:
  hf/                       the model as save_pretrained writes it (config.json, safetensors)
  batches.safetensors       x.<i>, y.<i> (int64, B x T) for each fine-tuning step
  reference.safetensors     logits of batch 0 (eval, fp32) and grad.<name> of the mean
                            cross-entropy on batch 0 (transformers' parameter names)
  reference.json            the optimizer / schedule settings and the loss of every step of a
                            fine-tuning loop (AdamW in frugal's weight-decay groups, frugal's
                            cosine schedule, gradient clipping) over the batches
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optim_reference import lr_at  # noqa: E402  (frugal's schedules, one definition)

VOCAB, B, T, STEPS = 96, 3, 12, 20


def build(arch):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-6)
    if arch == "llama":
        # Llama 3.1's frequency scaling, untied output projection.
        cfg = LlamaConfig(**common, rope_theta=50000.0, tie_word_embeddings=False,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 16})
        return LlamaForCausalLM(cfg)
    cfg = Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg)


def mean_ce(model, x, y):
    logits = model(input_ids=x).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def main(out, arch):
    torch.manual_seed(3)
    model = build(arch).float()
    # transformers initialises norms at one and biases at zero: perturb them, so that a
    # weight loaded into the wrong place cannot pass unnoticed.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(f"{out}/hf")
    # Four batches, each seen five times: something to learn within 20 steps.
    gen = torch.Generator().manual_seed(4)
    distinct = [(torch.randint(0, VOCAB, (B, T), generator=gen),
                 torch.randint(0, VOCAB, (B, T), generator=gen)) for _ in range(4)]
    batches = {}
    for i in range(STEPS):
        batches[f"x.{i}"], batches[f"y.{i}"] = (t.clone() for t in distinct[i % 4])
    save_file(batches, f"{out}/batches.safetensors")

    model.eval()
    logits, loss = mean_ce(model, batches["x.0"], batches["y.0"])
    loss.backward()
    ref = {"logits": logits.detach().contiguous()}
    for name, p in model.named_parameters():
        ref[f"grad.{name}"] = p.grad.detach().contiguous()
    save_file(ref, f"{out}/reference.safetensors")

    # Fine-tuning in frugal's optimizer groups: weight decay on matrices only.
    o = {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "clip_grad_norm": 1.0}
    sched = {"type": "cosine", "warmup_steps": 3, "min_lr": 3e-4, "decay_steps": 0}
    model.zero_grad(set_to_none=True)
    model.train()
    params = [p for _, p in model.named_parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": o["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], foreach=False)
    losses = []
    for step in range(STEPS):
        _, loss = mean_ce(model, batches[f"x.{step}"], batches[f"y.{step}"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(params, o["clip_grad_norm"], foreach=False)
        for g in opt.param_groups:
            g["lr"] = lr_at(sched, step, o["lr"], STEPS)
        opt.step()
    json.dump({"optim": o, "schedule": sched, "steps": STEPS, "losses": losses},
              open(f"{out}/reference.json", "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
