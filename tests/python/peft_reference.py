"""PEFT (0.21) LoRA adapters on a small random Llama or Qwen2 from transformers, and what frugal
must reproduce (tests/integration/test_peft_python.cpp).

Usage:
  peft_reference.py OUT_DIR llama|qwen2 lora
      hf/                     the base model as save_pretrained writes it (fp32, seeded)
      adapter/                a PEFT adapter (save_pretrained) on LORA["targets"], its B nonzero
      batches.safetensors     x.<i>, y.<i> (int64, B x T) for each training step
      reference.safetensors   logits of batch 0 (eval) with the adapter; grad.<name> of every
                              adapter tensor (PEFT's saved names) for the mean cross-entropy on
                              batch 0; final.<name>: the adapters after the training loop
      reference.json          the LoRA and optimizer settings, the losses of STEPS AdamW steps
                              (PeftModel, the adapters trained, the base frozen)
  peft_reference.py OUT_DIR llama|qwen2 qlora
      hf/, batches.safetensors as above; qlora_adapter/ (PEFT, on QLORA["targets"], B nonzero)
      reference.json          the losses of STEPS AdamW steps of a loop whose target layers
                              compute torchao's linear_nf4(x, to_nf4(W0, 64, 256)) + b
                              + scale B A x (the same adapters as qlora_adapter/)
      reference.safetensors   logits of batch 0 of that model before training
  peft_reference.py OUT_DIR check BASE PEFT_DIR MERGED_DIR
      loads PEFT_DIR with PeftModel.from_pretrained(base, PEFT_DIR) and MERGED_DIR with
      AutoModelForCausalLM; writes OUT_DIR/check.safetensors (peft_logits, merged_logits of x
      from OUT_DIR/logits.safetensors) and prints one JSON line: the adapter keys missing from
      and unexpected in the file, PEFT's warnings, transformers' missing / unexpected weights.
Exits with 3 when peft or torchao is not installed (the test skips).
"""
import json
import sys
import warnings

import torch
import torch.nn.functional as F

try:
    from peft import LoraConfig, PeftModel, get_peft_model
    from peft.utils import get_peft_model_state_dict
except ImportError as e:  # the test skips
    print(f"peft is not installed: {e}")
    sys.exit(3)
from safetensors.torch import load_file, save_file
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

VOCAB, B, T, STEPS = 96, 3, 12, 20
# Plain LoRA: rsLoRA's scale on the Qwen2 (whose q/k/v projections have biases).
LORA = {"llama": {"r": 4, "alpha": 8, "rslora": False, "targets": ["q_proj", "v_proj", "down_proj"]},
        "qwen2": {"r": 4, "alpha": 6, "rslora": True, "targets": ["q_proj", "v_proj", "o_proj", "up_proj"]}}
# QLoRA: layers whose sizes NF4 holds (multiples of 64 x 256 values).
QLORA = {"r": 4, "alpha": 8, "rslora": False, "targets": ["q_proj", "o_proj", "down_proj"]}
OPTIM = {"lr": 1e-2, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}


def build(arch):
    # 128 x 128 and 256 x 128 weights: NF4 holds them (QLoRA); k/v 64 x 128 (two KV heads).
    common = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-6)
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**common, rope_theta=50000.0, tie_word_embeddings=False))
    return Qwen2ForCausalLM(Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True))


def base_model(out, arch):
    """The seeded base, saved once to OUT/hf (norms and biases perturbed from their initial
    ones and zeros, so that a weight in the wrong place shows)."""
    torch.manual_seed(3)
    model = build(arch).float()
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(f"{out}/hf")
    return AutoModelForCausalLM.from_pretrained(f"{out}/hf", dtype=torch.float32)


def write_batches(out):
    gen = torch.Generator().manual_seed(4)
    distinct = [(torch.randint(0, VOCAB, (B, T), generator=gen),
                 torch.randint(0, VOCAB, (B, T), generator=gen)) for _ in range(4)]
    batches = {}
    for i in range(STEPS):
        batches[f"x.{i}"], batches[f"y.{i}"] = (t.clone() for t in distinct[i % 4])
    save_file(batches, f"{out}/batches.safetensors")
    return batches


def mean_ce(model, x, y):
    logits = model(input_ids=x).logits
    return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def peft_model(base, lora, seed):
    cfg = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], target_modules=lora["targets"],
                     lora_dropout=0.0, bias="none", use_rslora=lora["rslora"],
                     task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    # B starts at zero in PEFT: made nonzero, so that the adapters change the logits and every
    # gradient of A is nonzero too.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return model


def saved_name(name):
    """PEFT's saved name of a parameter: the adapter's name ("default") left out."""
    return name.replace(".default.", ".")


def train(model, params, batches):
    opt = torch.optim.AdamW(params, lr=OPTIM["lr"], betas=tuple(OPTIM["betas"]), eps=OPTIM["eps"],
                            weight_decay=OPTIM["weight_decay"], foreach=False)
    losses = []
    for step in range(STEPS):
        _, loss = mean_ce(model, batches[f"x.{step}"], batches[f"y.{step}"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def lora_case(out, arch):
    base = base_model(out, arch)
    batches = write_batches(out)
    lora = LORA[arch]
    model = peft_model(base, lora, seed=5)
    model.save_pretrained(f"{out}/adapter")
    model.eval()
    logits, loss = mean_ce(model, batches["x.0"], batches["y.0"])
    loss.backward()
    ref = {"logits": logits.detach().contiguous()}
    adapters = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for name, p in adapters:
        ref[f"grad.{saved_name(name)}"] = p.grad.detach().contiguous()
    model.zero_grad(set_to_none=True)
    model.train()
    losses = train(model, [p for _, p in adapters], batches)
    for name, p in adapters:
        ref[f"final.{saved_name(name)}"] = p.detach().contiguous()
    save_file(ref, f"{out}/reference.safetensors")
    json.dump({"lora": lora, "optim": OPTIM, "steps": STEPS, "losses": losses,
               "adapters": len(adapters)}, open(f"{out}/reference.json", "w"))


class Nf4LoraLinear(torch.nn.Module):
    """torchao's NF4 weight with a LoRA adapter: linear_nf4(x, W) + b + scale B A x."""

    def __init__(self, linear, a, b, scale, to_nf4):
        super().__init__()
        self.weight = to_nf4(linear.weight.detach().clone(), 64, 256)
        self.bias = None if linear.bias is None else linear.bias.detach().clone()
        self.lora_A = torch.nn.Parameter(a.clone())
        self.lora_B = torch.nn.Parameter(b.clone())
        self.scale = scale

    def forward(self, x):
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4
        y = linear_nf4(x, self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scale


def qlora_case(out, arch):
    try:
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4
    except ImportError as e:
        print(f"torchao is not installed: {e}")
        sys.exit(3)
    base_model(out, arch)
    batches = write_batches(out)
    # The adapters' starting values, written by PEFT as a user's adapter folder would be.
    peft_model(AutoModelForCausalLM.from_pretrained(f"{out}/hf", dtype=torch.float32), QLORA,
               seed=6).save_pretrained(f"{out}/qlora_adapter")
    start = load_file(f"{out}/qlora_adapter/adapter_model.safetensors")
    scale = QLORA["alpha"] / QLORA["r"]
    model = AutoModelForCausalLM.from_pretrained(f"{out}/hf", dtype=torch.float32)
    for p in model.parameters():
        p.requires_grad_(False)
    params = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name not in QLORA["targets"] or not isinstance(child, torch.nn.Linear):
                continue
            full = f"base_model.model.{name}.{child_name}"
            layer = Nf4LoraLinear(child, start[f"{full}.lora_A.weight"],
                                  start[f"{full}.lora_B.weight"], scale, to_nf4)
            setattr(module, child_name, layer)
            params += [layer.lora_A, layer.lora_B]
    assert len(params) == len(start), (len(params), len(start))
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batches["x.0"]).logits
    save_file({"logits": logits.contiguous()}, f"{out}/reference.safetensors")
    model.train()
    losses = train(model, params, batches)
    json.dump({"lora": QLORA, "optim": OPTIM, "steps": STEPS, "losses": losses},
              open(f"{out}/reference.json", "w"))


def check_case(out, base_dir, peft_dir, merged_dir):
    x = load_file(f"{out}/logits.safetensors")["x"]
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(base, peft_dir)
    peft_warnings = [str(w.message) for w in caught if "adapter" in str(w.message).lower()
                     and "key" in str(w.message).lower()]
    # The adapter tensors the model has against those the file holds.
    wanted = {f"base_model.model.{k}" if not k.startswith("base_model.") else k
              for k in get_peft_model_state_dict(model).keys()}
    given = set(load_file(f"{peft_dir}/adapter_model.safetensors").keys())
    model.eval()
    with torch.no_grad():
        peft_logits = model(input_ids=x).logits
    merged, info = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32,
                                                        output_loading_info=True)
    merged.eval()
    with torch.no_grad():
        merged_logits = merged(input_ids=x).logits
    save_file({"peft_logits": peft_logits.contiguous(), "merged_logits": merged_logits.contiguous()},
              f"{out}/check.safetensors")
    print(json.dumps({"missing": sorted(wanted - given), "unexpected": sorted(given - wanted),
                      "adapter_tensors": len(given), "peft_warnings": peft_warnings,
                      "merged_missing": sorted(info["missing_keys"]),
                      "merged_unexpected": sorted(info["unexpected_keys"]),
                      "peft_type": str(model.peft_config["default"].peft_type),
                      "target_modules": sorted(model.peft_config["default"].target_modules)}))


def main(argv):
    out, what = argv[1], argv[2]
    if what == "check":
        check_case(out, argv[3], argv[4], argv[5])
    elif argv[3] == "lora":
        lora_case(out, what)
    else:
        qlora_case(out, what)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
