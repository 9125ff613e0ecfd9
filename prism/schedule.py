"""Head schedules as values: per-layer head counts, their validation, text form and cost algebra.

A schedule only decides how each layer splits its d_model-wide attention into heads. Q, K, V and O stay
d_model x d_model in every layer, so every valid schedule has the uniform baseline's parameter count and
FLOPs per token; `param_count` and `flops_per_token` compute both from the schedule so tests can prove it.

Text form: comma-separated runs `HEADSxLAYERS`, e.g. `4x2,8x5,16x17` is 2 layers of 4 heads, then 5 of 8,
then 17 of 16. A bare `HEADS` means one layer. `format` always writes the shortest run-length form.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from prism.config import ModelConfig, is_power_of_two

MAX_LAYERS = 65_536  # a schedule text longer than this is a typo (or an attack), never a model: refused before expanding


class ScheduleError(ValueError):
    """A schedule that cannot be used with a model config; the message names the fix."""


@dataclass(frozen=True)
class Schedule:
    heads: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", tuple(int(h) for h in self.heads))

    @classmethod
    def uniform(cls, n_heads: int, n_layer: int) -> Schedule:
        return cls((n_heads,) * n_layer)

    @classmethod
    def parse(cls, text: str, n_layer: int | None = None) -> Schedule:
        """`text` as a schedule. Its layer count is summed before any run is expanded, so `1x1000000000` costs nothing:
        with `n_layer` a count other than the model's is refused, and without it one above MAX_LAYERS."""
        runs: list[tuple[int, int]] = []
        for run in text.replace(" ", "").split(","):
            count, sep, repeat = run.partition("x")
            try:
                n_heads, n_layers = int(count), int(repeat if sep else 1)
            except ValueError:
                raise ScheduleError(f"cannot parse schedule run {run!r} in {text!r}; write HEADSxLAYERS, e.g. 4x2,8x4") from None
            if n_heads < 1 or n_layers < 1:
                raise ScheduleError(f"schedule run {run!r} must have heads >= 1 and layers >= 1")
            runs.append((n_heads, n_layers))
        total = sum(n for _, n in runs)
        if n_layer is not None and total != n_layer:
            raise ScheduleError(f"schedule {text!r} has {total} layers but the model has n_layer={n_layer}")
        if total > MAX_LAYERS:
            raise ScheduleError(f"schedule {text!r} has {total} layers, more than any model here (at most {MAX_LAYERS})")
        return cls(tuple(h for h, n in runs for _ in range(n)))

    def __str__(self) -> str:
        runs: list[list[int]] = []
        for h in self.heads:
            if runs and runs[-1][0] == h:
                runs[-1][1] += 1
            else:
                runs.append([h, 1])
        return ",".join(f"{h}x{n}" for h, n in runs)

    @property
    def n_layer(self) -> int:
        return len(self.heads)

    @property
    def is_monotone(self) -> bool:
        """Non-decreasing head count with depth: the Prism family (few wide heads early, many narrow late)."""
        return all(a <= b for a, b in zip(self.heads, self.heads[1:]))

    @property
    def is_uniform(self) -> bool:
        return len(set(self.heads)) <= 1

    def head_dims(self, d_model: int) -> tuple[int, ...]:
        return tuple(d_model // h for h in self.heads)


def allowed_head_counts(cfg: ModelConfig) -> list[int]:
    """Head counts whose head dim d_model/h is a power of two within [dh_min, dh_max], ascending."""
    counts = []
    dh = cfg.dh_max
    while dh >= cfg.dh_min:
        if cfg.d_model % dh == 0:
            counts.append(cfg.d_model // dh)
        dh //= 2
    return counts


def validate(schedule: Schedule, cfg: ModelConfig) -> None:
    """Raise ScheduleError naming the first offending layer and the allowed head counts."""
    if schedule.n_layer != cfg.n_layer:
        raise ScheduleError(f"schedule {schedule} has {schedule.n_layer} layers but the model has n_layer={cfg.n_layer}")
    allowed = allowed_head_counts(cfg)
    for layer, h in enumerate(schedule.heads):
        if h < 1 or cfg.d_model % h:
            raise ScheduleError(f"layer {layer}: {h} heads do not divide d_model={cfg.d_model}; allowed head counts: {allowed}")
        dh = cfg.d_model // h
        if not is_power_of_two(dh) or not cfg.dh_min <= dh <= cfg.dh_max:
            raise ScheduleError(
                f"layer {layer}: {h} heads give head dim {dh}, not a power of two in "
                f"[{cfg.dh_min}, {cfg.dh_max}]; allowed head counts: {allowed}"
            )


def is_valid(schedule: Schedule, cfg: ModelConfig) -> bool:
    try:
        validate(schedule, cfg)
    except ScheduleError:
        return False
    return True


def param_count(cfg: ModelConfig, schedule: Schedule, *, include_embeddings: bool = True) -> int:
    """Exact trainable parameters of `prism.model.PrismLM` (tied embeddings counted once).

    The per-layer attention term sums per-head slices of Q, K, V (d x dh each, plus bias) and O (dh x d), so a
    schedule could only change it if heads x head_dim != d_model, which `validate` forbids.
    """
    validate(schedule, cfg)
    d, b = cfg.d_model, int(cfg.bias)
    hidden = cfg.mlp_hidden
    n_in = 2 if cfg.mlp == "swiglu" else 1  # SwiGLU's fc holds the gate and the up projection
    norm = d + (b * d if cfg.norm == "layernorm" else 0)  # weight (+ bias); RMSNorm has no bias
    total = 0
    for h in schedule.heads:
        dh = d // h
        attention = h * 3 * (d * dh + b * dh) + h * dh * d + b * d  # per-head q/k/v slices, then out proj
        attention += 2 * h * dh * int(cfg.qk_norm)  # per-head q and k gains
        mlp = d * n_in * hidden + b * n_in * hidden + hidden * d + b * d
        total += attention + mlp + 2 * norm
    total += norm  # final norm
    if include_embeddings:
        total += cfg.vocab_size * d  # tied token embedding
        total += cfg.block_size * d if cfg.positions == "learned" else 0  # RoPE has no parameters
    return total


def flops_per_token(cfg: ModelConfig, schedule: Schedule, seq_len: int | None = None) -> int:
    """Training FLOPs per token, nanoGPT convention: 6 x non-embedding weights + attention scores and AV.

    Each head costs 2·T·dh FLOPs for scores and 2·T·dh for the weighted sum (forward); backward doubles
    that again, so training is 3x forward. Summed over heads, heads·dh = d_model in every layer.
    """
    T = seq_len or cfg.block_size
    non_embedding = param_count(cfg, schedule, include_embeddings=False)
    attention = sum(3 * h * (2 * T * dh + 2 * T * dh) for h, dh in zip(schedule.heads, schedule.head_dims(cfg.d_model)))
    return 6 * non_embedding + attention


def enumerate_monotone(n_layer: int, counts: Iterable[int]) -> list[Schedule]:
    """Every non-decreasing schedule over `counts`: C(L+K-1, K-1) of them."""
    counts = sorted(set(counts))
    out: list[Schedule] = []

    def extend(prefix: list[int], start: int) -> None:
        if len(prefix) == n_layer:
            out.append(Schedule(tuple(prefix)))
            return
        for i in range(start, len(counts)):
            extend([*prefix, counts[i]], i)

    extend([], 0)
    return out


PAPER_REACH_DEPTH = 0.29  # the Prism paper's 24-layer ramp reaches the baseline head count by layer 7 of 24


def paper_ramp(n_layer: int, counts: list[int], baseline_heads: int) -> Schedule:
    """Fewest (widest) heads at layer 0, climbing through every allowed count to the baseline's by relative depth
    0.29, then the baseline count to the last layer (the paper's "baseline preservation phase")."""
    top = sorted(counts).index(baseline_heads)
    reach = min(n_layer, max(top, math.ceil(PAPER_REACH_DEPTH * n_layer)))
    levels = [top * layer // reach if layer < reach else top for layer in range(n_layer)]
    return Schedule(tuple(sorted(counts)[level] for level in levels))
