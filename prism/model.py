"""The Prism model: a GPT-2 decoder whose layer l splits attention into schedule.heads[l] heads.

Every weight matrix has the same shape whatever the schedule (fused qkv d -> 3d, out d -> d), so the uniform
schedule is exactly GPT-2 and two schedules built with the same seed start from identical weights: a schedule
comparison is paired down to the initialisation.

Two attention paths: `forward` uses fused scaled-dot-product attention for training; `trace` computes the
softmax explicitly so analysis can read per-layer attention probabilities and hidden states.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from prism.config import ModelConfig
from prism.schedule import Schedule, allowed_head_counts, validate


@dataclass
class Trace:
    """What the explicit path exposes for analysis."""

    logits: torch.Tensor  # (B, T, V)
    hidden_states: list[torch.Tensor]  # L+1 x (B, T, D): embeddings, then the residual stream after each block
    attentions: list[torch.Tensor]  # L x (B, H_l, T, T): attention probabilities, causal


def _norm(cfg: ModelConfig) -> nn.Module:
    return nn.RMSNorm(cfg.d_model) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.d_model, bias=cfg.bias)


def _rope_tables(head_dim: int, block_size: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of rotary angles (T, head_dim), half-split layout: pair i rotates dims i and i + head_dim/2."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv_freq).repeat(1, 2)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, n_head: int):
        super().__init__()
        self.n_head = n_head
        head_dim = cfg.d_model // n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)
        # QK-norm gains span d_model (one per channel of every head), so their size ignores the head count
        self.q_gain = nn.Parameter(torch.ones(cfg.d_model)) if cfg.qk_norm else None
        self.k_gain = nn.Parameter(torch.ones(cfg.d_model)) if cfg.qk_norm else None
        self.rope = cfg.positions == "rope"
        if self.rope:  # tables at this layer's head dim; buffers, not parameters, and not saved
            cos, sin = _rope_tables(head_dim, cfg.block_size)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

    def _heads(self, t: torch.Tensor, gain: torch.nn.Parameter | None) -> torch.Tensor:
        """(B, T, C) -> (B, H, T, dh): the only place the head count matters."""
        B, T, C = t.shape
        t = t.view(B, T, self.n_head, C // self.n_head)
        if gain is not None:
            t = F.rms_norm(t, (t.size(-1),)) * gain.view(self.n_head, -1)
        t = t.transpose(1, 2)
        if self.rope:
            t = _rotate(t, self.cos[:T].to(t.dtype), self.sin[:T].to(t.dtype))
        return t

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = self._heads(q, self.q_gain), self._heads(k, self.k_gain), self._heads(v, None)
        attention = None
        if return_attention:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, H, T, T)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            attention = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            y = attention @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads side by side
        return self.resid_dropout(self.proj(y)), attention


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.swiglu, self.exact = cfg.mlp == "swiglu", cfg.mlp == "gelu-exact"
        hidden = cfg.mlp_hidden
        self.fc = nn.Linear(cfg.d_model, (2 if self.swiglu else 1) * hidden, bias=cfg.bias)  # SwiGLU: gate, up
        self.proj = nn.Linear(hidden, cfg.d_model, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="none" if self.exact else "tanh")
        return self.dropout(self.proj(h))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, n_head: int):
        super().__init__()
        self.ln_1 = _norm(cfg)
        self.attn = CausalSelfAttention(cfg, n_head)
        self.ln_2 = _norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        a, attention = self.attn(self.ln_1(x), return_attention)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, attention


def _run_block(block: Block, x: torch.Tensor) -> torch.Tensor:
    return block(x)[0]


def _run_head(model: PrismLM, x: torch.Tensor, targets: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits = model.lm_head(model.ln_f(x))  # (B, T, V)
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
    return logits, loss


@functools.cache
def _compiled(fn: Callable, backend: str) -> Callable:
    """One compiled function per process and backend, whichever model calls it: Dynamo caches graphs per function."""
    return torch.compile(fn, backend=backend)


class PrismLM(nn.Module):
    def __init__(self, cfg: ModelConfig, schedule: Schedule):
        super().__init__()
        validate(schedule, cfg)
        self.cfg, self.schedule = cfg, schedule
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model) if cfg.positions == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, h) for h in schedule.heads)
        self.ln_f = _norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self._run_block, self._run_head = _run_block, _run_head  # eager; compile_parts swaps in compiled ones
        self.apply(self._init_weights)
        # GPT-2: scale the residual projections by 1/sqrt(2L) so the residual stream's variance stays put
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())  # parameters() yields the tied weight once

    def _embed(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        if self.cfg.block_size < T:
            raise ValueError(f"sequence length {T} exceeds block_size={self.cfg.block_size}")
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T, device=idx.device))
        return self.drop(x)  # (B, T, D)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = self._embed(idx)
        for block in self.blocks:
            x = self._run_block(block, x)
        return self._run_head(self, x, targets)  # plain functions held by the model: passed the model explicitly

    def compile_parts(self, backend: str = "inductor") -> None:
        """torch.compile the blocks and the output head, not the whole forward. A whole-model graph is specialised
        to its schedule, so a worker that trains schedule after schedule recompiles for each, reaches Dynamo's
        recompile limit after a few and silently runs eager from then on. A block's graph depends only on its head
        count: one graph per head count the model's dims allow (and per train/eval mode) serves every schedule and
        every model of the process, and the recompile limit is raised to hold exactly those. The compiled functions
        are shared, never bound to this model, so a dropped model is freed at once, with no reference cycle."""
        self._run_block, self._run_head = _compiled(_run_block, backend), _compiled(_run_head, backend)
        graphs = 2 * (len(allowed_head_counts(self.cfg)) + 1)  # train and eval modes; every head count, then the head
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, graphs)

    def trace(self, idx: torch.Tensor) -> Trace:
        """Explicit-softmax forward pass returning hidden states and attention probabilities of every layer."""
        x = self._embed(idx)
        hidden_states, attentions = [x], []
        for block in self.blocks:
            x, attention = block(x, return_attention=True)
            hidden_states.append(x)
            attentions.append(attention)
        return Trace(self.lm_head(self.ln_f(x)), hidden_states, attentions)
