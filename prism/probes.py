"""Probe texts for auditing a model's layer geometry: a fixed corpus set and a constructed "hard" set.

Both are deterministic (no randomness beyond fixed seeds), so two audits of one model give the same profile
and audits of two models see exactly the same tokens.

- `corpus`: evenly spaced windows of the built-in corpus's validation split (text the model was trained on the
  distribution of, never the exact training windows).
- `hard`: sequences whose next tokens depend on far-away context, where a model must integrate globally:
  * brackets: random nested bracket strings "([{<" ... ">}])" with letters in between; closing a bracket needs the
    matching opener, often many tokens back;
  * copies: a random span of corpus text, unrelated filler, then the same span again about half a window later;
    predicting the copy needs attention that reaches back to the first occurrence.
Tokens are bytes (ids 0..255), the built-in corpora's tokenisation. A model with another vocabulary (a GPT-2 BPE
checkpoint) reads the same ids as its own tokens: the structure (repeats, matched pairs) survives, the meaning of
the text does not, so profiles of such models describe geometry on structured, not natural, input.
A model trained on a synthetic task (prism.tasks) is probed on what it learned: its `corpus` set is the task's own
validation sequences at the model's block size, and the `hard` set's byte ids are folded into its vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from prism.data import load_corpus
from prism.tasks import is_task, parse_task, task_val_batches

_OPEN, _CLOSE = b"([{<", b")]}>"
_LETTERS = b"abcdefghijklmnopqrstuvwxyz "


@dataclass(frozen=True)
class ProbeSet:
    name: str
    tokens: torch.Tensor  # (N, T) int64 byte ids
    description: str


def corpus_probes(block_size: int, n: int = 8, corpus: str = "shakespeare") -> ProbeSet:
    """`n` evenly spaced windows of the corpus's validation split."""
    data = load_corpus(corpus).val
    starts = np.linspace(0, len(data) - block_size - 1, n).astype(np.int64)
    tokens = np.stack([data[s : s + block_size] for s in starts]).astype(np.int64)
    return ProbeSet("corpus", torch.from_numpy(tokens), f"{n} evenly spaced {corpus} validation windows")


def _brackets(rng: np.random.Generator, length: int) -> bytes:
    out, stack = bytearray(), list[int]()
    while len(out) + len(stack) < length:
        r = rng.random()
        if r < 0.35 and len(out) + 2 * (len(stack) + 1) <= length:
            kind = int(rng.integers(len(_OPEN)))
            stack.append(kind)
            out.append(_OPEN[kind])
        elif r < 0.6 and stack:
            out.append(_CLOSE[stack.pop()])
        else:
            out.append(_LETTERS[int(rng.integers(len(_LETTERS)))])
    while stack:
        out.append(_CLOSE[stack.pop()])
    return bytes(out[:length]).ljust(length, b" ")


def _copy(rng: np.random.Generator, text: np.ndarray, length: int) -> bytes:
    span = max(4, length // 4)
    gap = length - 2 * span  # filler between the two occurrences: the copy sits ~half a window back
    start, filler = rng.integers(0, len(text) - span, size=2)
    first = bytes(text[start : start + span])
    filler_bytes = bytes(text[filler : filler + gap])
    return (first + filler_bytes + first)[:length]


def hard_probes(block_size: int, n: int = 8, corpus: str = "shakespeare", seed: int = 0) -> ProbeSet:
    """n/2 bracket strings and n/2 copied-span sequences of `block_size` tokens each."""
    rng = np.random.default_rng(seed)
    text = load_corpus(corpus).val
    rows = [_brackets(rng, block_size) if i % 2 == 0 else _copy(rng, text, block_size) for i in range(n)]
    tokens = torch.tensor([list(r) for r in rows], dtype=torch.int64)
    return ProbeSet("hard", tokens, f"{(n + 1) // 2} nested-bracket strings and {n // 2} copied spans ~{block_size // 2} tokens apart")


def task_probes(task: str, block_size: int, n: int = 8) -> ProbeSet:
    """The first `n` of the task's fixed validation sequences (those every trial of a study is scored on)."""
    tokens = task_val_batches(parse_task(task), block_size, n, 1)[0][0]
    return ProbeSet("corpus", tokens.to(torch.int64), f"{n} validation sequences of task {task}")


def probe_sets(block_size: int, n: int = 8, trained_on: str = "shakespeare") -> list[ProbeSet]:
    """The audit's probe sets, windows of min(block_size, 128) tokens (longer adds cost, not information); a model
    `trained_on` a task sees that task's sequences at its own block size (a task's window has no other length)."""
    if is_task(trained_on):
        return [task_probes(trained_on, block_size, n), hard_probes(block_size, n)]
    T = min(block_size, 128)
    return [corpus_probes(T, n), hard_probes(T, n)]
