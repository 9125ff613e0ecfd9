"""A plain GPT-2 training step, written after nanoGPT's model.py and train.py: the yardstick for Prism's speed.

Same shape as a uniform Prism model (learned positions, LayerNorm, GELU MLP, fused qkv, tied embeddings, SDPA
attention), nanoGPT's initialisation and its optimizer set-up (AdamW, weight decay on the >= 2-D tensors, fused
only on CUDA), and its loop (lr set per step, backward, clip, step, gradients freed). None of it is Prism's model or
training code, so a gap between the two is a gap in Prism. `activation` defaults to nanoGPT's exact GELU; GPT-2's
tanh approximation is there so a test can show that both models then do the very same arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from prism import TrainConfig


class SelfAttention(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, d: int, activation: str):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU(approximate=activation)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d: int, n_head: int, activation: str):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, n_head)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_layer: int, d: int, n_head: int, activation: str = "none"):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.wpe = nn.Embedding(block_size, d)
        self.h = nn.ModuleList(Block(d, n_head, activation) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, nanoGPT's direction
        for m in self.modules():  # nanoGPT's _init_weights, in module order
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


class ReferenceLoop:
    """nanoGPT's train.py step in fp32: the optimizer set-up of `configure_optimizers` (fused AdamW on CUDA only,
    unless `fused` says otherwise) and the inner loop, for any model whose forward returns (logits, loss)."""

    def __init__(self, model: nn.Module, batches: Iterator[tuple[torch.Tensor, torch.Tensor]], tcfg: TrainConfig, device="cpu", fused=None):
        self.model, self.batches, self.tcfg = model.to(device), batches, tcfg
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": tcfg.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        extra = {"fused": True} if fused or (fused is None and device.startswith("cuda")) else {}  # None: nanoGPT's rule
        self.optimizer = torch.optim.AdamW(groups, lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), **extra)
        self.device, self.step = device, 0

    def train_steps(self, n: int) -> float:
        for _ in range(n):
            for group in self.optimizer.param_groups:
                group["lr"] = self.tcfg.lr_at(self.step)
            x, y = (t.to(self.device) for t in next(self.batches))
            _, loss = self.model(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tcfg.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.step += 1
        return loss.item()
