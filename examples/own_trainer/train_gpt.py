"""A small nanoGPT-style GPT trainer whose layers may each have their own head count.

Standalone on purpose: it imports neither `prism` nor `search`, only torch and the standard library, as a
researcher's own training script would. It is the example of docs/own-model.md:

- the one-`n_head` GPT made to take a per-layer list (docs/own-model.md, "A per-layer head list in a nanoGPT-style
  model"): `GPTConfig.n_head` is an int or one int per layer, and each `Block` is built with its layer's count;
- the trainer line protocol (search/trainers/protocol.schema.json): one JSON line when the model is built
  (`start`), one per evaluation (`eval`) and one at the end (`end`), appended to the file named by
  $PRISM_TRAINER_REPORT (stdout when it is unset);
- `run(request, reporter)`, the entry point of `[trainer] kind = "python"`: the same loop, reporting through the
  reporter the worker hands it instead of a file.

    python examples/own_trainer/train_gpt.py --heads 2,4,4 --steps 50 --data prism/corpora/shakespeare_milton.txt.xz
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 256  # bytes
    n_layer: int = 3
    n_head: int | tuple[int, ...] = 4  # one count for every layer, or one per layer
    n_embd: int = 64
    per_head_gate: bool = False  # a learned gain per head: makes the parameter count depend on the schedule

    def heads(self, layer: int) -> int:
        """The head count of `layer`: the recipe's one change to a one-`n_head` GPT."""
        return self.n_head if isinstance(self.n_head, int) else self.n_head[layer]

    def __post_init__(self) -> None:
        if not isinstance(self.n_head, int) and len(self.n_head) != self.n_layer:
            raise ValueError(f"n_head lists {len(self.n_head)} layers, the model has n_layer={self.n_layer}")
        for layer in range(self.n_layer):
            if self.n_embd % self.heads(layer):
                raise ValueError(f"layer {layer}: {self.heads(layer)} heads do not divide n_embd={self.n_embd}")


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.gate = nn.Parameter(torch.ones(n_head)) if config.per_head_gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.gate is not None:
            y = y * self.gate.view(1, -1, 1, 1)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config, config.heads(layer))
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(nn.Linear(config.n_embd, 4 * config.n_embd), nn.GELU(), nn.Linear(4 * config.n_embd, config.n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        """nanoGPT's estimate: 6 per non-embedding weight plus attention's 12 * L * d * T; heads x head dim = d in
        every layer, so it does not depend on the head counts."""
        c = self.config
        non_embedding = self.num_params() - self.wte.weight.numel() - self.wpe.weight.numel()
        return 6 * non_embedding + 12 * c.n_layer * c.n_embd * c.block_size


class LineReporter:
    """Writes the protocol's JSON lines to the file the search tool names (stdout when run by hand)."""

    def __init__(self, path: str | None):
        self.out = open(path, "a", encoding="utf-8") if path else sys.stdout  # noqa: SIM115 (open for the whole run)

    def _line(self, **fields) -> None:
        self.out.write(json.dumps(fields) + "\n")
        self.out.flush()

    def start(self, **fields) -> None:
        self._line(event="start", **fields)

    def evaluated(self, **fields) -> None:
        self._line(event="eval", **fields)

    def end(self, **fields) -> None:
        self._line(event="end", **fields)


def read_text(path: str) -> bytes:
    data = Path(path).read_bytes()
    return lzma.decompress(data) if path.endswith(".xz") else data


def heads_from(args: argparse.Namespace) -> tuple[int, ...]:
    """Per-layer head counts: --heads 2,4,4, --schedule 2x1,4x2 or --schedule-file (export --format nanogpt)."""
    if args.schedule_file:
        return tuple(json.loads(Path(args.schedule_file).read_text())["n_head"])
    if args.schedule:
        runs = [run.partition("x") for run in args.schedule.split(",")]
        return tuple(int(h) for h, _, n in runs for _ in range(int(n or 1)))
    return tuple(int(h) for h in args.heads.split(","))


def train(args: argparse.Namespace, reporter) -> float:
    """Train on random windows of the text, evaluate every eval_every steps; returns the final val loss."""
    torch.manual_seed(args.seed)
    heads = heads_from(args)
    config = GPTConfig(block_size=args.block_size, n_layer=len(heads), n_head=heads, n_embd=args.d_model, per_head_gate=args.per_head_gate)
    device = torch.device(args.device)
    model = GPT(config).to(device)
    reporter.start(n_params=model.num_params(), flops_per_token=model.flops_per_token())
    data = torch.frombuffer(bytearray(read_text(args.data)), dtype=torch.uint8).long()
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    generator = torch.Generator().manual_seed(args.seed)

    def batch(source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(source) - args.block_size - 1, (args.batch_size,), generator=generator)
        x = torch.stack([source[s : s + args.block_size] for s in starts])
        y = torch.stack([source[s + 1 : s + 1 + args.block_size] for s in starts])
        return x.to(device), y.to(device)

    val_generator = torch.Generator().manual_seed(1234)  # the same validation windows for every schedule
    val_starts = torch.randint(len(val_data) - args.block_size - 1, (args.eval_batches * args.batch_size,), generator=val_generator)

    @torch.no_grad()
    def evaluate() -> float:
        model.eval()
        x = torch.stack([val_data[s : s + args.block_size] for s in val_starts]).to(device)
        y = torch.stack([val_data[s + 1 : s + 1 + args.block_size] for s in val_starts]).to(device)
        loss = sum(model(xb, yb).item() for xb, yb in zip(x.split(args.batch_size), y.split(args.batch_size))) / args.eval_batches
        model.train()
        return loss

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    tokens_per_step = args.batch_size * args.block_size
    timed_steps, timed_s, val_loss = 0, 0.0, math.nan
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        x, y = batch(train_data)
        loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step > 1:  # the first step pays one-off set-up: not the schedule's speed
            timed_steps, timed_s = timed_steps + 1, timed_s + time.perf_counter() - started
        if step % args.eval_every == 0 or step == args.steps:
            val_loss = evaluate()
            reporter.evaluated(step=step, tokens=step * tokens_per_step, val_loss=val_loss, train_loss=loss.item())
    tokens_per_s = timed_steps * tokens_per_step / timed_s if timed_s else 0.0
    reporter.end(
        val_loss=val_loss,
        tokens_per_s=tokens_per_s,
        n_params=model.num_params(),
        flops_per_token=model.flops_per_token(),
        steps=args.steps,
        tokens=args.steps * tokens_per_step,
    )
    return val_loss


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", default="4,4,4", help="per-layer head counts, comma-separated")
    p.add_argument("--schedule", help="per-layer head counts as runs HEADSxLAYERS, e.g. 2x1,4x2")
    p.add_argument("--schedule-file", help="a nanoGPT schedule file (prism-search export --format nanogpt)")
    p.add_argument("--data", required=True, help="a text file (.xz read as xz)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-batches", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--per-head-gate", action="store_true", help="a learned gain per head (not parameter-neutral)")
    return p


def run(request, reporter) -> None:
    """`[trainer] kind = "python"`: the same training, its settings from the request (request.options: any other
    flag, e.g. {"lr": 1e-3}) instead of a command line."""
    fields = ("schedule", "seed", "steps", "eval_every", "device", "d_model", "block_size", "batch_size")
    given = {name: getattr(request, name) for name in fields} | {"data": request.corpus} | dict(request.options)
    argv = [f"--{key.replace('_', '-')}={value}" for key, value in given.items() if value is not True]
    train(parser().parse_args(argv + [f"--{key.replace('_', '-')}" for key, value in given.items() if value is True]), reporter)


if __name__ == "__main__":
    train(parser().parse_args(), LineReporter(os.environ.get("PRISM_TRAINER_REPORT")))
