"""transformers' side of bench/generate: random Llama folders and greedy generate timed.

  python_generate.py make DIR SHAPE         write a random Llama folder of SHAPE (tiny | smollm2-135m)
  python_generate.py time DIR DTYPE N PROMPT_IDS ROUNDS
      model.generate(do_sample=False, max_new_tokens=N, KV cache, batch 1) in DTYPE (fp32 |
      bf16) ROUNDS times after one warm-up; prints one JSON line: the median seconds and the
      new ids of the last round.
  python_generate.py weights DIR            the folder's parameter count (one JSON line)
  python_generate.py ceiling DIR DTYPE      tokens/s of the folder's matrix products alone: one
      row through torch's linear for every weight matrix (the output head included), as one
      decoded token computes them, the best of 5 passes of 10 tokens (one JSON line). Nothing
      else a token needs is counted, so no decoder on this machine gets past it.
  python_generate.py bandwidth              the machine's memory read bandwidth as decoding
      meets it: torch.sum over a 1 GiB fp32 tensor with torch's threads, the best of 7 passes
      after a warm-up, in GB/s (one JSON line). A greedy token reads every weight once, so
      tokens/s x weight bytes can not pass it.
"""
import json
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig, LlamaForCausalLM

SHAPES = {
    # SmolLM2-135M's shapes (its config.json), random weights.
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=2048, rope_theta=100000.0,
                         tie_word_embeddings=True, rms_norm_eps=1e-5),
    # Small enough that the per-token overhead around the arithmetic decides the speed.
    "tiny": dict(vocab_size=1024, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                 tie_word_embeddings=True),
}


def make(folder, shape):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(bos_token_id=None, eos_token_id=None, pad_token_id=None,
                                         **SHAPES[shape]))
    model.generation_config = GenerationConfig(eos_token_id=None, bos_token_id=None,
                                               pad_token_id=None)
    model.save_pretrained(folder)


def timed(folder, dtype, n, prompt, rounds):
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32).eval()
    ids = torch.tensor([prompt])
    mask = torch.ones_like(ids)
    times, out = [], None
    with torch.inference_mode():
        for r in range(rounds + 1):
            start = time.perf_counter()
            out = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n)
            if r > 0:
                times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": statistics.median(times),
                      "tokens": out[0, len(prompt):].tolist()}))


def weights(folder):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    print(json.dumps({"parameters": sum(p.numel() for p in model.parameters())}))


def ceiling(folder, dtype):
    dt = torch.bfloat16 if dtype == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dt)
    mats = [p.detach() for p in model.parameters() if p.dim() == 2]  # the embedding: the head
    rows = {m.shape[1]: torch.randn(1, m.shape[1], dtype=dt) for m in mats}
    best = None
    with torch.inference_mode():
        for _ in range(6):
            start = time.perf_counter()
            for _ in range(10):
                for m in mats:
                    torch.nn.functional.linear(rows[m.shape[1]], m)
            took = (time.perf_counter() - start) / 10
            best = took if best is None else min(best, took)
    print(json.dumps({"tokens_per_s": 1.0 / best}))


def bandwidth():
    data = torch.ones(1 << 28, dtype=torch.float32)  # 1 GiB
    data.sum()
    best = None
    for _ in range(7):
        start = time.perf_counter()
        data.sum()
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    print(json.dumps({"gb_per_s": data.numel() * 4 / best / 1e9}))


def main(argv):
    if argv[1] == "make":
        make(argv[2], argv[3])
    elif argv[1] == "weights":
        weights(argv[2])
    elif argv[1] == "ceiling":
        ceiling(argv[2], argv[3])
    elif argv[1] == "bandwidth":
        bandwidth()
    else:
        timed(argv[2], argv[3], int(argv[4]), [int(x) for x in argv[5].split(",")], int(argv[6]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
