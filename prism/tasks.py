"""Synthetic sequence tasks: corpora generated from a seed at load time, scored on their answer tokens only.

A task is named like a corpus, `KIND` or with settings `KIND:SETTING=INT,...` (`mqar:pairs=8,key_len=2`), so it
travels wherever a corpus name does (a study's `[data] corpus`, a checkpoint, a trial spec) and nothing is
downloaded or stored. Only the answers are targets: every other target is IGNORE, which `cross_entropy` skips, so
the training and the validation loss are nats per answer token, and each task knows its trivial floor (the loss of
a guess that looks nothing up), which a learned task ends far below.

- `mqar`, multi-query associative recall: a sequence lists `pairs` key-value pairs, each key `key_len` tokens drawn
  from `keys` key tokens (the keys of one sequence all differ), each value one of `values` value tokens; then
  queries, each a listed key followed by its value, fill the sequence. Answering needs every value's key gathered
  into the value's position (key_len look-ups at fixed offsets), then a match of the query against them: two layers
  that must learn together. `fused=1` writes a key's last token and its value as one token.
- `pointer`: a table of base**digits symbols at fixed positions, then queries that spell a table index in `digits`
  digit tokens, each followed by the symbol there: a look-up keyed on position, one layer for one digit.
- `count`: symbols, each followed by how often it came before: a look-up keyed on the symbol itself.
- `mix`: each sequence a pointer one or a count one, by a fair coin, so one model needs both kinds of look-up.
- `offset`: units of a fresh symbol, a marker naming j in 1..offsets and an answer place; the last unit of each
  `group` answers with the symbols its group's markers aim at (each the j-th most recent unit's), as one word. One
  aim is a look-up keyed on relative position; a group of them is two steps: aim at every marker, then gather the
  group's results at fixed distances into the answer.
  With rotary positions one head selects offset j through its rotation frequencies, so a wide head (many
  frequencies) can aim where a narrow one (few) blurs over the window.

Fairness, as for text corpora: training sequences come from a generator seeded by the trial's seed alone, so two
schedules at one seed see the same sequences in the same order; validation sequences come from a fixed stream,
identical for every trial.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

IGNORE = -100  # torch's cross_entropy ignore_index: targets that score nothing
TASKS = ("mqar", "pointer", "count", "mix", "offset")
GENERATOR = 1  # the sampler's version, part of a task corpus's fingerprint: a changed sampler is a different corpus
_TRAIN_STREAM, _VAL_STREAM = 1, 2  # entropy prefixes: training seeds and the validation stream never share a generator


class TaskError(ValueError):
    """A task name or setting that cannot be used; the message names the fix."""


def _name(kind: str, task: Task) -> str:
    """The canonical name: every setting, in field order."""
    return f"{kind}:" + ",".join(f"{f.name}={getattr(task, f.name)}" for f in fields(task))


def _every_setting_positive(kind: str, task: Task) -> None:
    """A task whose settings are counts: each at least 1, said before anything is sampled."""
    for f in fields(task):
        if getattr(task, f.name) < 1:
            raise TaskError(f"{kind}: {f.name} must be at least 1, got {getattr(task, f.name)}")


def _sequences(context: np.ndarray, queries: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of block_size tokens from a context (n, C) and queries (n, Q, unit) whose last token is the
    answer: the one target of each query, predicted at the token before it. Tokens after the last whole query are
    padding (token 0, never a target)."""
    n, n_queries, unit = queries.shape
    sequence = np.zeros((n, block_size + 1), dtype=np.int64)
    sequence[:, : context.shape[1] + n_queries * unit] = np.concatenate([context, queries.reshape(n, -1)], axis=1)
    answers = context.shape[1] + unit * np.arange(n_queries) + unit - 1  # positions in the sequence
    targets = np.full((n, block_size), IGNORE, dtype=np.int64)
    targets[:, answers - 1] = sequence[:, answers]
    return sequence[:, :-1], targets


@dataclass(frozen=True)
class RecallTask:
    """`mqar`'s settings and its sampler."""

    pairs: int = 8
    key_len: int = 1
    keys: int = 16  # distinct key tokens
    values: int = 16  # distinct value tokens
    fused: int = 0  # 1: a key's last token and its value are one context token (keys x values more tokens)

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < (0 if f.name == "fused" else 1):
                raise TaskError(f"mqar: {f.name} must be at least 1, got {getattr(self, f.name)}")
        if self.fused not in (0, 1):
            raise TaskError(f"mqar: fused must be 0 or 1, got {self.fused}")
        if self.pairs > self.keys**self.key_len:
            raise TaskError(f"mqar: {self.pairs} pairs need as many distinct keys; raise keys or key_len, or lower pairs")

    @property
    def name(self) -> str:
        return _name("mqar", self)

    @property
    def vocab_size(self) -> int:
        return self.keys + self.values + self.fused * self.keys * self.values  # keys, values, then fused pairs

    @property
    def context_unit(self) -> int:
        """Tokens per listed pair: the key's, then the value's (fused: the last key token's and the value's one)."""
        return self.key_len + 1 - self.fused

    @property
    def context_length(self) -> int:
        return self.pairs * self.context_unit

    def queries(self, block_size: int) -> int:
        """Queries that fit in a sequence of block_size + 1 tokens (inputs and next-token targets) after the pairs."""
        return (block_size + 1 - self.context_length) // (self.key_len + 1)

    def check_block(self, block_size: int) -> None:
        if self.queries(block_size) < 1:
            raise TaskError(
                f"{self.name}: block_size={block_size} has no room for a query after {self.pairs} pairs "
                f"(fix: model.block_size >= {self.context_length + self.key_len}, or fewer pairs)"
            )

    def sample(self, rng: np.random.Generator, n: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
        """`n` sequences as (inputs, targets), both (n, block_size) int64; targets are IGNORE except at answers."""
        self.check_block(block_size)
        n_queries = self.queries(block_size)
        codes = np.stack([rng.choice(self.keys**self.key_len, size=self.pairs, replace=False) for _ in range(n)])  # (n, P)
        digits = self.keys ** np.arange(self.key_len - 1, -1, -1)
        key_tokens = codes[..., None] // digits % self.keys  # (n, P, key_len): each key's tokens
        value_tokens = self.keys + rng.integers(0, self.values, size=(n, self.pairs))
        asked = rng.integers(0, self.pairs, size=(n, n_queries))
        rows = np.arange(n)[:, None]
        if self.fused:
            last = self.keys + self.values + key_tokens[..., -1] * self.values + value_tokens - self.keys
            context = np.concatenate([key_tokens[..., :-1], last[..., None]], axis=2).reshape(n, -1)
        else:
            context = np.concatenate([key_tokens, value_tokens[..., None]], axis=2).reshape(n, -1)
        query = np.concatenate([key_tokens[rows, asked], value_tokens[rows, asked][..., None]], axis=2)
        return _sequences(context, query, block_size)

    def floor(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        """The loss, in nats per answer, of guessing a value of the sequence's pairs in proportion to how often it
        occurs there: all a model knows without recall. A learned task ends far below it."""
        losses = []
        for row, target in zip(inputs, targets):
            context_values = row[self.context_unit - 1 : self.context_length : self.context_unit]
            if self.fused:
                context_values = self.keys + (context_values - self.keys - self.values) % self.values
            counts = np.bincount(context_values, minlength=self.vocab_size)
            answers = target[target != IGNORE]
            losses.append(-np.log(counts[answers] / self.pairs))
        return float(np.mean(np.concatenate(losses)))


@dataclass(frozen=True)
class PointerTask:
    """`pointer`'s settings and its sampler."""

    digits: int = 2
    base: int = 4
    symbols: int = 16  # distinct table tokens

    def __post_init__(self) -> None:
        _every_setting_positive("pointer", self)

    @property
    def name(self) -> str:
        return _name("pointer", self)

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.base  # table symbols, then digits

    @property
    def context_length(self) -> int:
        return self.base**self.digits

    def queries(self, block_size: int) -> int:
        return (block_size + 1 - self.context_length) // (self.digits + 1)

    def check_block(self, block_size: int) -> None:
        if self.queries(block_size) < 1:
            raise TaskError(
                f"{self.name}: block_size={block_size} has no room for a query after the table of {self.context_length} "
                f"(fix: model.block_size >= {self.context_length + self.digits}, or fewer digits)"
            )

    def sample(self, rng: np.random.Generator, n: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
        """As RecallTask.sample: (inputs, targets), targets IGNORE except at answers."""
        self.check_block(block_size)
        n_queries = self.queries(block_size)
        table = rng.integers(0, self.symbols, size=(n, self.context_length))
        asked = rng.integers(0, self.context_length, size=(n, n_queries))
        digits = asked[..., None] // self.base ** np.arange(self.digits - 1, -1, -1) % self.base
        answers = np.take_along_axis(table, asked, axis=1)
        return _sequences(table, np.concatenate([self.symbols + digits, answers[..., None]], axis=2), block_size)

    def floor(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        """The loss of guessing a symbol of the table in proportion to how often it occurs there."""
        losses = []
        for row, target in zip(inputs, targets):
            counts = np.bincount(row[: self.context_length], minlength=self.vocab_size)
            losses.append(-np.log(counts[target[target != IGNORE]] / self.context_length))
        return float(np.mean(np.concatenate(losses)))


@dataclass(frozen=True)
class CountTask:
    """`count`'s settings and its sampler."""

    symbols: int = 8
    cap: int = 8  # counts above cap - 1 are written as cap - 1

    def __post_init__(self) -> None:
        _every_setting_positive("count", self)

    @property
    def name(self) -> str:
        return _name("count", self)

    @property
    def vocab_size(self) -> int:
        return self.symbols + self.cap  # symbols, then counts

    def queries(self, block_size: int) -> int:
        return (block_size + 1) // 2

    def check_block(self, block_size: int) -> None:
        if block_size < 2:
            raise TaskError(f"{self.name}: block_size={block_size} has no room for a query (fix: model.block_size >= 2)")

    def sample(self, rng: np.random.Generator, n: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
        """As RecallTask.sample: (inputs, targets), targets IGNORE except at answers."""
        self.check_block(block_size)
        seen = rng.integers(0, self.symbols, size=(n, self.queries(block_size)))
        earlier = (seen[:, :, None] == seen[:, None, :]) & np.tri(seen.shape[1], k=-1, dtype=bool)[None]
        counts = self.symbols + np.minimum(earlier.sum(axis=2), self.cap - 1)
        return _sequences(np.zeros((n, 0), dtype=np.int64), np.stack([seen, counts], axis=2), block_size)

    def floor(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        """The loss of guessing each count from its query's place alone (the counts' distribution at that place in
        these very sequences): what a model knows without matching symbols."""
        answered = targets[:, targets[0] != IGNORE]  # (n, Q): every sequence answers at the same places
        losses = [-np.log(np.mean(column[:, None] == column[None, :], axis=1)) for column in answered.T]
        return float(np.mean(np.concatenate(losses)))


@dataclass(frozen=True)
class MixTask:
    """`mix`'s settings and its sampler: each sequence a pointer one or a count one, by a fair coin."""

    digits: int = 1
    base: int = 16
    symbols: int = 16
    count_symbols: int = 8
    cap: int = 8

    @property
    def pointer(self) -> PointerTask:
        return PointerTask(self.digits, self.base, self.symbols)

    @property
    def count(self) -> CountTask:
        return CountTask(self.count_symbols, self.cap)

    def __post_init__(self) -> None:
        _ = (self.pointer, self.count)  # each part checks its own settings

    @property
    def name(self) -> str:
        return _name("mix", self)

    @property
    def vocab_size(self) -> int:
        return self.pointer.vocab_size + self.count.vocab_size  # the pointer's tokens, then the count's

    def check_block(self, block_size: int) -> None:
        self.pointer.check_block(block_size)
        self.count.check_block(block_size)

    def sample(self, rng: np.random.Generator, n: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
        """As RecallTask.sample: (inputs, targets), targets IGNORE except at answers."""
        counting = rng.random(n) < 0.5
        pointer_x, pointer_y = self.pointer.sample(rng, n, block_size)
        count_x, count_y = self.count.sample(rng, n, block_size)
        shift = self.pointer.vocab_size
        inputs = np.where(counting[:, None], count_x + shift, pointer_x)
        targets = np.where(counting[:, None], np.where(count_y == IGNORE, IGNORE, count_y + shift), pointer_y)
        return inputs, targets

    def floor(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        """Each kind's floor on its own sequences, weighted by their answers."""
        shift = self.pointer.vocab_size
        counting = inputs[:, 0] >= shift  # a count sequence opens with a count symbol, a pointer one with a table symbol
        parts = [
            (self.pointer.floor(inputs[~counting], targets[~counting]), np.sum(targets[~counting] != IGNORE)),
            (
                self.count.floor(inputs[counting] - shift, np.where(targets[counting] == IGNORE, IGNORE, targets[counting] - shift)),
                np.sum(targets[counting] != IGNORE),
            ),
        ]
        return float(sum(loss * answers for loss, answers in parts) / sum(answers for _, answers in parts))


@dataclass(frozen=True)
class OffsetTask:
    """`offset`'s settings and its sampler."""

    offsets: int = 16  # a marker names the j-th most recent unit, j in 1..offsets
    symbols: int = 16
    group: int = 1  # units whose aimed symbols one answer spells

    def __post_init__(self) -> None:
        _every_setting_positive("offset", self)

    @property
    def name(self) -> str:
        return _name("offset", self)

    @property
    def blank(self) -> int:
        """The token in the answer place of a unit that does not end its group."""
        return self.symbols + self.offsets

    @property
    def vocab_size(self) -> int:
        return self.blank + 1 + self.symbols**self.group  # symbols, markers, the blank, answer words

    def queries(self, block_size: int) -> int:
        return (block_size + 1) // (3 * self.group)

    def check_block(self, block_size: int) -> None:
        if self.queries(block_size) < 1:
            raise TaskError(f"{self.name}: block_size={block_size} has no room for a query (fix: model.block_size >= {3 * self.group - 1})")

    def sample(self, rng: np.random.Generator, n: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
        """As RecallTask.sample: (inputs, targets), targets IGNORE except at answers. Unit i is a fresh symbol, the
        marker of j (at most i + 1: early units aim nearer) and an answer place; the last unit of each group answers
        with the word, in base `symbols`, of the symbols its group's markers aim at (the first unit's first)."""
        self.check_block(block_size)
        n_groups = self.queries(block_size)
        n_units = n_groups * self.group
        fresh = rng.integers(0, self.symbols, size=(n, n_units))
        reach = np.minimum(self.offsets, np.arange(1, n_units + 1))  # unit i can reach i + 1 units back
        offset = 1 + (rng.random((n, n_units)) * reach).astype(np.int64)
        aimed = np.take_along_axis(fresh, np.arange(n_units) + 1 - offset, axis=1)
        words = aimed.reshape(n, n_groups, self.group) @ self.symbols ** np.arange(self.group - 1, -1, -1)
        places = np.full((n, n_groups, self.group), self.blank)
        places[..., -1] = self.blank + 1 + words
        units = np.stack([fresh, self.symbols - 1 + offset, places.reshape(n, n_units)], axis=2)
        return _sequences(np.zeros((n, 0), dtype=np.int64), units.reshape(n, n_groups, -1), block_size)

    def floor(self, inputs: np.ndarray, targets: np.ndarray) -> float:
        """The loss of guessing each aimed symbol among the symbols of the units its marker could name, in
        proportion to how often each occurs there: all a model knows that sees the window but cannot aim within it."""
        losses = []
        for row, target in zip(inputs, targets):
            for at in np.flatnonzero(target != IGNORE):  # the last marker of a group
                word = target[at] - self.blank - 1
                for k in range(self.group):  # the k-th unit back from the group's last
                    marker = at - 3 * k
                    window = row[max(0, marker - 1 - 3 * (self.offsets - 1)) : marker : 3]
                    losses.append(-np.log(np.mean(window == word // self.symbols**k % self.symbols)))
        return float(np.sum(losses) / np.sum(targets != IGNORE))


Task = RecallTask | PointerTask | CountTask | MixTask | OffsetTask
_KINDS: dict[str, type[RecallTask] | type[PointerTask] | type[CountTask] | type[MixTask] | type[OffsetTask]] = {
    "mqar": RecallTask,
    "pointer": PointerTask,
    "count": CountTask,
    "mix": MixTask,
    "offset": OffsetTask,
}


def is_task(name: str) -> bool:
    return name.partition(":")[0] in TASKS


def parse_task(name: str) -> Task:
    """`KIND` or `KIND:SETTING=INT,...` as a task; a TaskError names the bad part and the fix."""
    kind, _, settings = name.partition(":")
    if kind not in TASKS:
        raise TaskError(f"unknown task {kind!r}; use one of {', '.join(TASKS)}")
    known = [f.name for f in fields(_KINDS[kind])]
    values: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in settings.split(","))):
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise TaskError(f"task {name!r}: cannot read {item!r}; write SETTING=INT with SETTING one of {', '.join(known)}")
        try:
            values[key] = int(text)
        except ValueError:
            raise TaskError(f"task {name!r}: {key}={text.strip()!r} is not an integer") from None
    return _KINDS[kind](**values)


def task_train_batches(task: Task, block_size: int, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless fresh training sequences; the order depends on `seed` only."""
    import torch

    rng = np.random.default_rng([_TRAIN_STREAM, seed])
    while True:
        x, y = task.sample(rng, batch_size, block_size)
        yield torch.from_numpy(x), torch.from_numpy(y)


def task_val_batches(task: Task, block_size: int, batch_size: int, n_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Validation sequences from one fixed stream: identical for every trial."""
    import torch

    x, y = task.sample(np.random.default_rng([_VAL_STREAM]), batch_size * n_batches, block_size)
    return [(torch.from_numpy(x[i : i + batch_size]), torch.from_numpy(y[i : i + batch_size])) for i in range(0, len(x), batch_size)]
