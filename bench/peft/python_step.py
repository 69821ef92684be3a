"""The Python side of bench/peft: LoRA with PEFT on transformers' LlamaForCausalLM, built with
the shapes of a resolved frugal config (`frugal config show`), trained for the config's max_steps
on random tokens and measured like frugal's trainer (bench/python/llama_bench.py).

Usage: python_step.py RESOLVED.yaml MODE THREADS LIBFRUGAL
  MODE lora   peft.get_peft_model with model.lora's rank, alpha, dropout, targets (all-linear:
              PEFT's own shorthand, every linear layer but the output head) and rslora;
       qlora  the same, after the weights of the linear layers model.quantize_base.modules names
              are replaced by torchao's NF4 (to_nf4, block 64, scales in groups of 256: the
              format frugal's NF4 equals bit for bit). PEFT's usual QLoRA is bitsandbytes' 4-bit
              layers (not in this venv), and its torchao dispatch takes only TorchAOBaseTensor
              subclasses, which NF4Tensor is not: it wraps such a layer in its generic
              lora.Linear, whose base layer's F.linear runs torchao's linear_nf4 (NF4Tensor's
              __torch_function__), which keeps only the NF4 tensors for backward.
The precision (bf16-mixed: torch.autocast("cpu", bfloat16) over fp32 weights) and the
checkpointing policy (full: every decoder layer, non-reentrant) come from the config.
Prints {"step_s", "peak_bytes", "baseline_bytes", "rss_peak_bytes", "losses"} (one entry per
step), "trainable" (elements), "lora_layer" (the class PEFT put on the adapted layers) and
"quantized" ({layer name: [out, in]}) as JSON.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from llama_bench import adamw, build_llama, checkpoint_layers, tracking_allocator, train  # noqa: E402


def matches(name, targets):
    """frugal's rule (frugal/models/lora.h): the dotted name, or its last parts."""
    return any(name == t or name.endswith("." + t) for t in targets)


def quantize_nf4(model, modules):
    from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4

    done = {}
    for name, layer in model.named_modules():
        if isinstance(layer, nn.Linear) and name != "lm_head" and (
                modules == ["all-linear"] or matches(name, modules)):
            layer.weight = nn.Parameter(to_nf4(layer.weight.detach()), requires_grad=False)
            done[name] = list(layer.weight.shape)
    if not done:
        raise SystemExit(f"python_step.py: quantize_base.modules {modules} name no linear layer")
    return done


def main(cfg_path, mode, threads, lib_path):
    from peft import LoraConfig, get_peft_model

    lib = tracking_allocator(lib_path)
    torch.set_num_threads(threads)
    cfg = yaml.safe_load(open(cfg_path))
    m = cfg["model"]
    assert m["type"] == "llama" and m["lora"]["rank"] > 0
    torch.manual_seed(cfg["run"]["seed"])
    model = build_llama(m)
    quantized = {}
    if mode == "qlora":
        q = m["quantize_base"]
        assert q["type"] == "nf4"
        quantized = quantize_nf4(model, q["modules"] or m["lora"]["targets"])
    elif mode != "lora":
        raise SystemExit(f"python_step.py: mode {mode}: lora or qlora")
    checkpoint_layers(model, cfg["strategy"]["checkpointing"]["policy"])
    lora = m["lora"]
    targets = lora["targets"] or ["q_proj", "v_proj"]  # frugal's llama default
    model = get_peft_model(model, LoraConfig(
        r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
        target_modules="all-linear" if targets == ["all-linear"] else targets,
        use_rslora=lora["rslora"]))
    opt = adamw(model.parameters(), cfg["optim"])
    out = train(model, opt, cfg, lib)
    out["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    out["lora_layer"] = sorted({type(x).__module__ + "." + type(x).__name__
                                for x in model.modules() if hasattr(x, "lora_A")})
    out["quantized"] = quantized
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
