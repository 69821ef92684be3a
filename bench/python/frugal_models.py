"""frugal's built-in models written in plain PyTorch, with the same parameter names, so that
weights exported from frugal load with load_state_dict and benchmarks compare like with like."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.qkv = nn.Linear(c["n_embd"], 3 * c["n_embd"], bias=c["bias"])
        self.proj = nn.Linear(c["n_embd"], c["n_embd"], bias=c["bias"])
        self.resid_drop = nn.Dropout(c["dropout"])
        self.n_head, self.dropout = c["n_head"], c["dropout"]

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        return self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(c["n_embd"], 4 * c["n_embd"], bias=c["bias"])
        self.proj = nn.Linear(4 * c["n_embd"], c["n_embd"], bias=c["bias"])
        self.drop = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x), approximate="tanh")))


def _maybe_checkpoint(module, x, enabled):
    if enabled and torch.is_grad_enabled():
        return checkpoint(module, x, use_reentrant=False)
    return module(x)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln2 = nn.LayerNorm(c["n_embd"])
        self.mlp = Mlp(c)
        self.checkpoint_targets = ()  # selective checkpointing: {"attn", "mlp"}

    def forward(self, x):
        x = x + _maybe_checkpoint(self.attn, self.ln1(x), "attn" in self.checkpoint_targets)
        return x + _maybe_checkpoint(self.mlp, self.ln2(x), "mlp" in self.checkpoint_targets)


class Gpt(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok_emb = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.pos_emb = nn.Embedding(c["block_size"], c["n_embd"])
        self.drop = nn.Dropout(c["dropout"])
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"])
        self.checkpoint_blocks = set()  # indices of blocks checkpointed whole
        std = 0.02 / math.sqrt(2 * c["n_layer"])
        for name, p in self.named_parameters():
            if name.endswith(".proj.weight"):
                nn.init.normal_(p, 0.0, std)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for i, block in enumerate(self.blocks):
            x = _maybe_checkpoint(block, x, i in self.checkpoint_blocks)
        return F.linear(self.ln_f(x), self.tok_emb.weight)


class MlpNet(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        widths = [in_features] + list(hidden)
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
        self.head = nn.Linear(widths[-1], out_features)

    def forward(self, x):
        h = x.flatten(1)
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.head(h)


def apply_checkpointing(model, policy, k=2, targets=("attn",)):
    """frugal's policies with torch.utils.checkpoint (non-reentrant)."""
    n = len(model.blocks)
    model.checkpoint_blocks = {"full": set(range(n)), "every_k": set(range(0, n, k))}.get(policy, set())
    for block in model.blocks:
        block.checkpoint_targets = tuple(targets) if policy == "selective" else ()


def decay_groups(model, weight_decay):
    """frugal's grouping: decay on dim >= 2 parameters only."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
