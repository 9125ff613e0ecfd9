"""Corpora (built-in or the user's own), tokenizers, and the batches that make schedule comparisons fair.

Nothing here touches the network. Two corpora ship with the project, and synthetic tasks (prism.tasks) are
generated from their name, such as `mqar:pairs=8,key_len=2`:
- `shakespeare`: Shakespeare's works plus Milton's Paradise Lost, Paradise Regained and Areopagitica
  (Project Gutenberg, public domain; 5.7 MB of ASCII), compressed in `prism/corpora/`.
- `stdlib`: the running Python's standard-library sources (no `test/`), ~13 MB. They differ between Python
  versions, which is why every corpus carries a fingerprint that studies store and check.

User corpora (`load_corpus(PATH, ...)`):
- text: a file, a folder (every non-hidden file under it, sorted) or a glob such as `books/*.txt`;
- nanoGPT token files: one `.bin` (split by val_fraction) or a folder holding `train.bin` and `val.bin`, raw
  uint16 (or uint32) ids, with the vocab size declared because a raw file cannot say it;
- a Hugging Face `datasets` directory written by `save_to_disk` (needs the `datasets` extra), with a `text`
  or an `input_ids` column; a DatasetDict's `validation`/`val`/`test` split becomes the validation split.
Text is tokenised as bytes (vocab 256, the default) or with a byte-level BPE trained locally with the
`tokenizers` library on the training part only, cached on disk under the text's fingerprint.

Fairness: the validation set is a fixed list of evenly spaced windows of the validation split, the same for
every trial that uses the same corpus and block size; training windows come from a generator seeded by the
trial's seed alone, so two schedules trained with the same seed see the same data in the same order.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import lzma
import mmap
import os
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from prism.tasks import GENERATOR, Task, TaskError, is_task, parse_task, task_train_batches, task_val_batches

if TYPE_CHECKING:  # torch loads with the first batch: reading a corpus (and a study's fingerprint of it) needs none
    import torch

CORPORA_DIR = Path(__file__).parent / "corpora"
BUILTIN_CORPORA = ("shakespeare", "stdlib")


class CorpusError(ValueError):
    """A corpus that cannot be used; the message names the fix."""


@dataclass(frozen=True)
class CorpusFacts:
    """What a corpus holds: what a command states before it trains, and the fingerprint a study records. Token
    counts are None for a task, which generates its sequences."""

    name: str
    fingerprint: str
    train_tokens: int | None
    val_tokens: int | None
    vocab_size: int
    mapped: bool  # a token file, read through memory maps a batch at a time, never whole


@dataclass(frozen=True)
class Corpus:
    name: str
    tokens: np.ndarray  # 1-D token ids: the training split, or train and validation cut by val_fraction
    vocab_size: int
    val_fraction: float = 0.1
    val_tokens: np.ndarray | None = None  # a separate validation split (val.bin, a dataset's split); else cut from `tokens`
    task: Task | None = None  # a synthetic task generates its sequences; its tokens are empty

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over the tokens, vocab and split: a study refuses to mix corpora that differ in any of them.
        A token file (memory-mapped, maybe tens of GB) is hashed by its size and a bounded sample, never read whole.
        A task's settings and its sampler's version stand for its tokens."""
        if self.task is not None:
            return hashlib.sha256(f"{self.task.name}|generator={GENERATOR}".encode()).hexdigest()[:16]
        h = hashlib.sha256()
        parts = [self.tokens] if self.val_tokens is None else [self.tokens, self.val_tokens]
        for part in parts:
            _hash_tokens(h, part)
        h.update(f"|vocab={self.vocab_size}|val={self.val_fraction}".encode())
        if self.val_tokens is not None:
            h.update(f"|split={len(self.tokens)}".encode())
        return h.hexdigest()[:16]

    @property
    def facts(self) -> CorpusFacts:
        """What the corpus holds, for a command to state before it trains."""
        generated = self.task is not None
        return CorpusFacts(
            name=self.name,
            fingerprint=self.fingerprint,
            train_tokens=None if generated else len(self.train),
            val_tokens=None if generated else len(self.val),
            vocab_size=self.vocab_size,
            mapped=isinstance(self.tokens, np.memmap),
        )

    @property
    def train(self) -> np.ndarray:
        return self.tokens if self.val_tokens is not None else self.tokens[: int(len(self.tokens) * (1.0 - self.val_fraction))]

    @property
    def val(self) -> np.ndarray:
        return self.val_tokens if self.val_tokens is not None else self.tokens[int(len(self.tokens) * (1.0 - self.val_fraction)) :]


SAMPLE_CHUNKS = 64  # a mapped token file's fingerprint hashes its size and this many evenly spaced chunks
SAMPLE_CHUNK_TOKENS = 1 << 16


def _pieces(tokens: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(start, tokens) of what a corpus check reads: everything in memory; of a large mapped file, SAMPLE_CHUNKS
    evenly spaced chunks, copied out so that no more of the map stays resident than one chunk."""
    if not isinstance(tokens, np.memmap) or len(tokens) <= SAMPLE_CHUNKS * SAMPLE_CHUNK_TOKENS:
        yield 0, np.asarray(tokens)
        return
    for start in np.linspace(0, len(tokens) - SAMPLE_CHUNK_TOKENS, SAMPLE_CHUNKS, dtype=np.int64):
        piece = np.array(tokens[start : start + SAMPLE_CHUNK_TOKENS])
        _release(tokens)
        yield int(start), piece


def _hash_tokens(h: Any, tokens: np.ndarray) -> None:
    """Tokens in memory are hashed whole (as they always were); a large mapped file by its length, dtype and the
    sample `_pieces` reads, so no process reads it whole."""
    if isinstance(tokens, np.memmap) and len(tokens) > SAMPLE_CHUNKS * SAMPLE_CHUNK_TOKENS:
        h.update(f"|mapped {len(tokens)} {tokens.dtype}|".encode())
    for _, piece in _pieces(tokens):
        h.update(np.ascontiguousarray(piece).tobytes())


def _shakespeare_bytes() -> bytes:
    return lzma.decompress((CORPORA_DIR / "shakespeare_milton.txt.xz").read_bytes())


def _stdlib_bytes() -> bytes:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "test" not in p.relative_to(root).parts[:1] and "site-packages" not in p.parts)
    return b"\n".join(p.read_bytes() for p in files)


# -- user corpora: read a source into (train, val or None) parts of text bytes or token ids --------------------


def _text_files(spec: str) -> list[Path]:
    if any(c in spec for c in "*?["):
        return sorted(Path(p) for p in glob.glob(spec, recursive=True) if Path(p).is_file())
    path = Path(spec)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [path]


def _read_bin(path: Path, dtype: str) -> np.ndarray:
    return np.memmap(path, dtype=np.dtype(dtype), mode="r")


def _read_hf_dataset(path: Path) -> tuple[str, Any, Any]:
    try:
        import datasets
    except ImportError:
        raise CorpusError(f"{path} is a Hugging Face dataset; install the extra: pip install 'prism-search[datasets]'") from None
    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise CorpusError(f"dataset {path} has splits {list(loaded)} but no 'train'; save one named train")
        val_name = next((n for n in ("validation", "val", "test") if n in loaded), None)
        parts = [loaded["train"], loaded[val_name] if val_name else None]
    else:
        parts = [loaded, None]
    columns = parts[0].column_names
    if "text" in columns:
        text = [None if p is None else "\n".join(p["text"]).encode() for p in parts]
        return "text", text[0], text[1]
    if "input_ids" in columns:
        ids = [None if p is None else np.fromiter((t for row in p["input_ids"] for t in row), dtype=np.int64) for p in parts]
        return "tokens", ids[0], ids[1]
    raise CorpusError(f"dataset {path} has columns {columns}; it needs a 'text' or an 'input_ids' column")


def _read_source(spec: str, token_dtype: str) -> tuple[str, Any, Any]:
    """('text', train_bytes, val_bytes|None) or ('tokens', train_ids, val_ids|None)."""
    path = Path(spec)
    if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        return _read_hf_dataset(path)
    if path.is_dir() and (path / "train.bin").is_file():
        if not (path / "val.bin").is_file():
            raise CorpusError(f"{path} has train.bin but no val.bin; add val.bin or pass the .bin file itself")
        return "tokens", _read_bin(path / "train.bin", token_dtype), _read_bin(path / "val.bin", token_dtype)
    if path.is_file() and path.suffix == ".bin":
        return "tokens", _read_bin(path, token_dtype), None
    return "text", b"\n".join(f.read_bytes() for f in _checked_text_files(spec)), None


def _checked_text_files(spec: str) -> list[Path]:
    """The text files of `spec`, each a regular file: a device (/dev/zero) would be read until memory runs out, a
    FIFO until a writer appears."""
    files = _text_files(spec)
    if not files or not all(f.exists() for f in files):
        raise CorpusError(
            f"corpus {spec!r} not found: not a built-in corpus ({', '.join(BUILTIN_CORPORA)}), file, folder or "
            "matching glob; check the path"
        )
    if odd := next((f for f in files if not f.is_file()), None):
        raise CorpusError(f"corpus {spec!r}: {str(odd)!r} is a device, pipe or socket, not a file; point it at text files")
    return files


def text_bytes(spec: str) -> int:
    """Bytes of text `load_corpus(spec)` reads into memory: 0 for built-ins (a few MB), token files (mapped, not
    read) and datasets folders; else the text files' total size, checked as `_read_source` checks them."""
    path = Path(spec)
    if spec in BUILTIN_CORPORA or is_task(spec):
        return 0
    if (path.is_file() and path.suffix == ".bin") or (path.is_dir() and (path / "train.bin").is_file()):
        return 0
    if path.is_dir() and ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        return 0
    return sum(f.stat().st_size for f in _checked_text_files(spec))


# -- tokenizers ----------------------------------------------------------------------------------------------

TOKENIZERS = ("bytes", "bpe")


def cache_dir() -> Path:
    """Where trained tokenizers live: $PRISM_CACHE_DIR, else ~/.cache/prism-search."""
    return Path(os.environ.get("PRISM_CACHE_DIR") or Path.home() / ".cache" / "prism-search")


def bpe_tokenizer(train_text: bytes, vocab_size: int):
    """A byte-level BPE trained on `train_text`, cached under the text's fingerprint (trained once per corpus)."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise CorpusError("tokenizer='bpe' needs the tokenizers library: pip install 'prism-search[bpe]'") from None
    path = _bpe_path(train_text, vocab_size)
    with _cache_lock(path):  # workers starting together on a new corpus: one trains, the others wait and read
        if path.is_file():
            return Tokenizer.from_file(str(path))
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator(_lines(train_text), trainer)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tok.save(str(tmp))
        os.replace(tmp, path)  # atomic: a reader without the lock (another file system's) never sees half a file
        return tok


def _bpe_path(train_text: bytes, vocab_size: int) -> Path:
    return cache_dir() / "tokenizers" / f"bpe-{hashlib.sha256(train_text).hexdigest()[:16]}-{vocab_size}.json"


def _bpe_encode(text: bytes, fit_on: bytes, vocab_size: int) -> np.ndarray:
    """`text` encoded with the BPE fitted on `fit_on`; the ids are cached beside the tokenizer (encoding is slow too)."""
    path = _bpe_path(fit_on, vocab_size).with_suffix(f".ids-{hashlib.sha256(text).hexdigest()[:16]}.npy")
    tokenizer = bpe_tokenizer(fit_on, vocab_size)
    with _cache_lock(path):
        if path.is_file():
            return np.load(path)
        ids = _encode(text, tokenizer)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npy")
        np.save(tmp, ids)
        os.replace(tmp, path)
        return ids


@contextlib.contextmanager
def _cache_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`.lock, held while the cached file is checked and, if missing, made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _lines(text: bytes, per_chunk: int = 2000) -> Iterator[str]:
    lines = text.decode("utf-8", errors="replace").splitlines(keepends=True)
    for i in range(0, len(lines), per_chunk):
        yield "".join(lines[i : i + per_chunk])


def _encode(text: bytes, tokenizer) -> np.ndarray:
    if tokenizer is None:
        return np.frombuffer(text, dtype=np.uint8)
    ids = [np.asarray(e.ids, dtype=np.uint32) for e in tokenizer.encode_batch(list(_lines(text)))]
    return np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint32)


BYTES_VOCAB = 256
BPE_VOCAB = 4096  # a BPE's size where vocab_size is not given


def corpus_vocab(name: str, tokenizer: str = "bytes", vocab_size: int | None = None) -> int:
    """The vocabulary `load_corpus` gives this corpus, known without reading it: a task's own tokens, else the
    declared `vocab_size` (a BPE's size, or token files' vocab, which they need), else the tokenizer's default.
    The model's vocabulary follows it unless a study sets its own. A task name that does not parse raises TaskError."""
    if is_task(name):
        return parse_task(name).vocab_size
    return vocab_size or (BPE_VOCAB if tokenizer == "bpe" else BYTES_VOCAB)


@lru_cache(maxsize=4)
def load_corpus(
    name: str = "shakespeare",
    val_fraction: float = 0.1,
    *,
    tokenizer: str = "bytes",
    vocab_size: int | None = None,
    token_dtype: str = "uint16",
) -> Corpus:
    """A built-in corpus, a task or a user corpus path (see the module docstring). Cached per process: workers load once.

    `vocab_size`: the BPE's size (default BPE_VOCAB), or the declared vocab of token files (required there).
    A task ignores `val_fraction` (its validation sequences come from their own stream) and sets its own vocabulary.
    """
    if not 0.0 < val_fraction < 0.5:
        raise CorpusError(f"val_fraction must be in (0, 0.5), got {val_fraction}")
    if tokenizer not in TOKENIZERS:
        raise CorpusError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")
    if token_dtype not in ("uint16", "uint32"):
        raise CorpusError(f"token_dtype={token_dtype!r} is not supported; use uint16 or uint32")
    if is_task(name):
        return _task_corpus(name, tokenizer, vocab_size)
    train: Any  # text bytes, then token ids
    val: Any
    if name in BUILTIN_CORPORA:
        kind, train, val = "text", {"shakespeare": _shakespeare_bytes, "stdlib": _stdlib_bytes}[name](), None
    else:
        kind, train, val = _read_source(name, token_dtype)
    vocab = corpus_vocab(name, tokenizer, vocab_size)
    if kind == "tokens":
        if tokenizer != "bytes":
            raise CorpusError(f"corpus {name!r} holds token ids already; drop tokenizer={tokenizer!r}")
        if vocab_size is None:
            raise CorpusError(f"corpus {name!r} holds token ids; declare the vocab_size of the tokenizer that made them")
    elif tokenizer == "bpe":
        fit_on = train if val is not None else train[: int(len(train) * (1.0 - val_fraction))]
        if not fit_on:
            raise CorpusError(f"corpus {name!r} is empty; point it at files with text in them")
        train, val = _bpe_encode(train, fit_on, vocab), None if val is None else _bpe_encode(val, fit_on, vocab)
    else:
        train, val = _encode(train, None), None if val is None else _encode(val, None)
    if len(train) == 0 or (val is not None and len(val) == 0):
        raise CorpusError(f"corpus {name!r} is empty{' (validation split)' if len(train) else ''}; point it at files with data in them")
    for part in (train,) if val is None else (train, val):
        _check_ids(name, part, vocab)
    return Corpus(name=name, tokens=train, vocab_size=vocab, val_fraction=val_fraction, val_tokens=val)


def _check_ids(name: str, tokens: np.ndarray, vocab: int) -> None:
    """Every id below `vocab`: all of them in memory; in a mapped token file, the fingerprint's sample (a full pass
    over tens of GB at every process start, driver and each worker, is what mapping avoids)."""
    for start, piece in _pieces(tokens):
        top = int(piece.max())
        if top >= vocab:
            where = start + int(np.argmax(piece >= vocab))
            raise CorpusError(
                f"corpus {name!r}: token id {top} (first bad id at position {where}) >= vocab_size={vocab}; "
                "declare the tokenizer's real vocab_size"
            )


def _task_corpus(name: str, tokenizer: str, vocab_size: int | None) -> Corpus:
    try:
        task = parse_task(name)
    except TaskError as e:
        raise CorpusError(str(e)) from None
    if tokenizer != "bytes" or vocab_size is not None:
        raise CorpusError(f"task {name!r} has its own tokens (vocab {task.vocab_size}); drop the tokenizer and vocab_size settings")
    return Corpus(name=name, tokens=np.zeros(0, dtype=np.int64), vocab_size=task.vocab_size, task=task)


def _windows(data: np.ndarray, starts: np.ndarray, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    idx = starts[:, None] + np.arange(block_size + 1)[None, :]  # (B, T+1)
    chunk = torch.from_numpy(data[idx].astype(np.int64))
    _release(data)
    return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()  # inputs, next-token targets


def _release(data: np.ndarray) -> None:
    """Unmap what a read of a mapped token file faulted in. The kernel maps whole readahead folios (up to MBs) per
    touched page, so random windows would otherwise leave hundreds of MB resident per process; the pages stay in
    the page cache, shared, and the next read maps them again (nanoGPT opens its memmap anew per batch instead)."""
    mapping = getattr(data, "_mmap", None) if isinstance(data, np.memmap) else None  # numpy's mmap.mmap of the file
    if mapping is not None:
        mapping.madvise(mmap.MADV_DONTNEED)


def check_windows(corpus: Corpus, block_size: int, n_val_windows: int) -> None:
    """Both splits hold a window of block_size+1 tokens and the validation split `n_val_windows` distinct ones.
    Torch-free, so a caller can check a corpus before it starts anything that would fail on it later.
    A task generates as many sequences as asked for; block_size only has to hold one query."""
    if corpus.task is not None:
        try:
            corpus.task.check_block(block_size)
        except TaskError as e:
            raise CorpusError(str(e)) from None
        return
    for split, data in (("training", corpus.train), ("validation", corpus.val)):
        if len(data) <= block_size + 1:
            raise CorpusError(
                f"{split} split of {corpus.name!r} ({len(data)} tokens) is shorter than the sequence length "
                f"block_size={block_size} + 1 (fix: lower model.block_size, raise data.val_fraction or use a longer corpus)"
            )
    if len(corpus.val) - block_size - 1 < n_val_windows:
        raise CorpusError(
            f"validation split of {corpus.name!r} ({len(corpus.val)} tokens) is too short for {n_val_windows} windows of "
            f"block_size={block_size} (fix: lower train.eval_batches, train.batch_size or model.block_size)"
        )


def train_batches(corpus: Corpus, block_size: int, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless random training windows (a task's: fresh sequences); the order depends on `seed` only."""
    check_windows(corpus, block_size, 0)
    if corpus.task is not None:
        return task_train_batches(corpus.task, block_size, batch_size, seed)
    return _text_train_batches(corpus, block_size, batch_size, seed)


def _text_train_batches(corpus: Corpus, block_size: int, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    data = corpus.train
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(data) - block_size - 1, size=batch_size)
        yield _windows(data, starts, block_size)


def val_batches(corpus: Corpus, block_size: int, batch_size: int, n_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A fixed set of evenly spaced validation windows: identical for every trial, no randomness at all."""
    n_windows = batch_size * n_batches
    check_windows(corpus, block_size, n_windows)
    if corpus.task is not None:
        return task_val_batches(corpus.task, block_size, batch_size, n_batches)
    data = corpus.val
    span = len(data) - block_size - 1
    starts = np.linspace(0, span, n_windows).astype(np.int64)
    return [_windows(data, starts[i : i + batch_size], block_size) for i in range(0, n_windows, batch_size)]
