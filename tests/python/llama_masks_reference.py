"""Padded and packed batches through transformers' LlamaForCausalLM, for frugal to reproduce.

Usage: llama_masks_reference.py OUT_DIR
Writes, under OUT_DIR:
  hf/                      a small random Llama (GQA) as save_pretrained writes it
  reference.safetensors    for each case C in {padded, packed}: C.x, C.y, C.position_ids
                           (and padded.attention_mask), C.logits (eval, fp32) and
                           C.grad.<name> of the mean cross-entropy with ignore_index -100
padded: rows of different lengths, right- and left-padded, with the attention mask and the
position ids transformers' generate makes (cumsum of the mask - 1, padding at 1).
packed: several documents per row, told apart only by position ids that restart; no mask
(transformers then keeps attention within each document).
In both, padding targets and a third of the others are -100.
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, T = 80, 12


def main(out):
    torch.manual_seed(5)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():  # norms away from one, so misplaced weights show
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(f"{out}/hf")
    model.eval()
    gen = torch.Generator().manual_seed(6)

    lengths = [12, 8, 9, 5]  # rows 1 and 3 right-padded, row 2 left-padded
    mask = torch.ones(len(lengths), T, dtype=torch.long)
    for i, n in enumerate(lengths):
        if i == 2:
            mask[i, : T - n] = 0
        else:
            mask[i, n:] = 0
    padded_pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    documents = [[5, 7], [3, 4, 5], [12]]
    packed_pos = torch.stack([torch.cat([torch.arange(n) for n in row]) for row in documents])

    ref = {}
    for case, pos, attn in (("padded", padded_pos, mask), ("packed", packed_pos, None)):
        rows = pos.size(0)
        x = torch.randint(1, VOCAB, (rows, T), generator=gen)
        y = torch.randint(0, VOCAB, (rows, T), generator=gen)
        if attn is not None:
            x = x.masked_fill(attn == 0, 0)
            y = y.masked_fill(attn == 0, -100)
        y = y.masked_fill(torch.rand(rows, T, generator=gen) < 0.33, -100)
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=x, attention_mask=attn, position_ids=pos, use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), ignore_index=-100)
        loss.backward()
        ref[f"{case}.x"], ref[f"{case}.y"], ref[f"{case}.position_ids"] = x, y, pos.contiguous()
        if attn is not None:
            ref[f"{case}.attention_mask"] = attn
        ref[f"{case}.logits"] = logits.detach().contiguous()
        for name, p in model.named_parameters():
            ref[f"{case}.grad.{name}"] = p.grad.detach().clone()
    save_file(ref, f"{out}/reference.safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
