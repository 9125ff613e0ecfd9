"""Built-in corpora, byte-level tokens, and the batches that make schedule comparisons fair.

Nothing here touches the network. Two corpora ship with the project:
- `shakespeare`: Shakespeare's works plus Milton's Paradise Lost, Paradise Regained and Areopagitica
  (Project Gutenberg, public domain; 5.7 MB of ASCII), compressed in `prism/corpora/`.
- `stdlib`: the running Python's standard-library sources (no `test/`), ~13 MB. They differ between Python
  versions, which is why every corpus carries a fingerprint that studies store and check.

Fairness: the validation set is a fixed list of evenly spaced windows of the validation split, the same for
every trial that uses the same corpus and block size; training windows come from a generator seeded by the
trial's seed alone, so two schedules trained with the same seed see the same data in the same order.
"""

from __future__ import annotations

import hashlib
import lzma
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

CORPORA_DIR = Path(__file__).parent / "corpora"
BUILTIN_CORPORA = ("shakespeare", "stdlib")


class CorpusError(ValueError):
    """A corpus that cannot be used; the message names the fix."""


@dataclass(frozen=True)
class Corpus:
    name: str
    tokens: np.ndarray  # 1-D token ids
    vocab_size: int
    val_fraction: float = 0.1

    @property
    def fingerprint(self) -> str:
        """sha256 over the tokens, vocab and split: a study refuses to mix corpora that differ in any of them."""
        return _fingerprint(self.tokens.tobytes(), self.vocab_size, self.val_fraction)

    @property
    def split(self) -> int:
        return int(len(self.tokens) * (1.0 - self.val_fraction))

    @property
    def train(self) -> np.ndarray:
        return self.tokens[: self.split]

    @property
    def val(self) -> np.ndarray:
        return self.tokens[self.split :]


@lru_cache(maxsize=8)
def _fingerprint(data: bytes, vocab_size: int, val_fraction: float) -> str:
    h = hashlib.sha256(data)
    h.update(f"|vocab={vocab_size}|val={val_fraction}".encode())
    return h.hexdigest()[:16]


def _shakespeare_bytes() -> bytes:
    return lzma.decompress((CORPORA_DIR / "shakespeare_milton.txt.xz").read_bytes())


def _stdlib_bytes() -> bytes:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "test" not in p.relative_to(root).parts[:1]
                   and "site-packages" not in p.parts)
    return b"\n".join(p.read_bytes() for p in files)


@lru_cache(maxsize=4)
def load_corpus(name: str = "shakespeare", val_fraction: float = 0.1) -> Corpus:
    """A built-in corpus as byte tokens (vocab 256). Cached per process: workers load it once."""
    readers = {"shakespeare": _shakespeare_bytes, "stdlib": _stdlib_bytes}
    if name not in readers:
        raise CorpusError(f"unknown corpus {name!r}; built-in corpora: {', '.join(BUILTIN_CORPORA)}")
    if not 0.0 < val_fraction < 0.5:
        raise CorpusError(f"val_fraction must be in (0, 0.5), got {val_fraction}")
    tokens = np.frombuffer(readers[name](), dtype=np.uint8)
    return Corpus(name=name, tokens=tokens, vocab_size=256, val_fraction=val_fraction)


def _windows(data: np.ndarray, starts: np.ndarray, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    idx = starts[:, None] + np.arange(block_size + 1)[None, :]  # (B, T+1)
    chunk = torch.from_numpy(data[idx].astype(np.int64))
    return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()  # inputs, next-token targets


def train_batches(corpus: Corpus, block_size: int, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless random training windows; the order depends on `seed` only."""
    data = corpus.train
    if len(data) <= block_size + 1:
        raise CorpusError(f"corpus {corpus.name!r} training split ({len(data)} tokens) is shorter than block_size+1")
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(data) - block_size - 1, size=batch_size)
        yield _windows(data, starts, block_size)


def val_batches(corpus: Corpus, block_size: int, batch_size: int, n_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A fixed set of evenly spaced validation windows: identical for every trial, no randomness at all."""
    data = corpus.val
    n_windows = batch_size * n_batches
    span = len(data) - block_size - 1
    if span < n_windows:
        raise CorpusError(
            f"validation split of {corpus.name!r} ({len(data)} tokens) is too short for {n_windows} windows of "
            f"block_size={block_size}; lower eval_batches or block_size"
        )
    starts = np.linspace(0, span, n_windows).astype(np.int64)
    return [_windows(data, starts[i : i + batch_size], block_size) for i in range(0, n_windows, batch_size)]
