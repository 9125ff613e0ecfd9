"""Model and training configuration: plain, torch-free dataclasses that check themselves.

Each setting is declared once, here: its type (a `Literal` lists the choices), its default and its bounds (field
metadata, in pydantic's words `gt`/`ge`/`lt`/`le`). The search service builds its study-config sections from
these same fields, so a TOML file is checked by exactly the rules the library applies.
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass, field, fields
from typing import Literal, get_args, get_origin, get_type_hints

# Upper bounds are generous (about 10x the largest real use) but finite: a number past them is a typo, and
# unbounded it would be stored first and then fail inside a worker, or never finish.
MAX_STEPS = 10**8
MAX_SEED = 2**31 - 1  # numpy's and torch's seeds take up to 2**32 - 1; the study offsets seeds by up to a few thousand

_BOUNDS = {
    "gt": (operator.gt, "greater than"),
    "ge": (operator.ge, "at least"),
    "lt": (operator.lt, "less than"),
    "le": (operator.le, "at most"),
}


# What a config stored before today's defaults (which train at a plain GPT-2's speed) meant by leaving these fields
# out, per config section: a stored config that names neither keeps them, so its study resumes, its checkpoints
# load and its runs retrain as they did.
EARLIER_DEFAULTS = {"model": {"mlp": "gelu"}, "train": {"fused_adamw": "cuda"}}


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def check_power_of_two(n: int) -> int:
    if not is_power_of_two(n):
        lower = 1 << (n.bit_length() - 1) if n > 0 else 1
        raise ValueError(f"{n} is not a power of two; use {lower} or {lower * 2}")
    return n


def _setting(default, **bounds):
    """A field with its bounds: the dataclass checks them, and pydantic reads the same metadata."""
    return field(default=default, metadata=bounds)


def check_fields(config) -> None:
    """Every field's type-level rules: its Literal choices, numbers that are numbers (not booleans, not inf/nan)
    and its bounds."""
    hints = get_type_hints(type(config))
    for f in fields(config):
        value = getattr(config, f.name)
        choices = get_args(hints[f.name]) if get_origin(hints[f.name]) is Literal else ()
        if choices and value not in choices:
            raise ValueError(f"{f.name}={value!r} is not one of {', '.join(choices)}")
        if hints[f.name] is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{f.name} must be an integer, got {value!r}")
        if hints[f.name] is float and (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)):
            raise ValueError(f"{f.name} must be a finite number, got {value!r}")  # inf passes every lower bound
        for key, bound in f.metadata.items():
            compare, words = _BOUNDS[key]
            if not compare(value, bound):
                raise ValueError(f"{f.name} must be {words} {bound}, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-2-style decoder. Head counts live in the `Schedule`, not here.

    `dh_min`/`dh_max` bound the head dimension d_model / heads that a schedule may use: powers of two keep
    attention kernels on their fast paths, and the bounds keep heads from being uselessly narrow or wide.

    Variants (the defaults are nanoGPT's GPT-2): `positions` learned absolute or rotary (RoPE, applied per head at
    that layer's head dim, no parameters); `norm` LayerNorm or RMSNorm; `mlp` exact GELU ("gelu-exact", nanoGPT's
    and torch's: torch's CPU tanh is slow, so on CPU it trains 4-5% faster than the tanh form at d_model 128,
    docs/benchmarks.md), GELU in GPT-2's tanh form ("gelu", what GPT-2 checkpoints expect, and the default of
    configs stored before the defaults changed: EARLIER_DEFAULTS) or SwiGLU (hidden width 2/3 of
    mlp_ratio * d_model, rounded up to a multiple of 8, so it costs about what the GELU MLP costs); `qk_norm`
    RMS-normalises queries and keys per head with a d_model-wide gain. None of them has a parameter whose shape
    depends on the head count, so every variant keeps schedules parameter- and FLOP-neutral.
    """

    vocab_size: int = _setting(256, gt=0, le=2**24)
    n_layer: int = _setting(6, gt=0, le=1024)
    d_model: int = _setting(128, gt=0, le=2**16)
    block_size: int = _setting(128, gt=0, le=2**20)
    dh_min: int = _setting(64, gt=0, le=2**16)
    dh_max: int = _setting(256, gt=0, le=2**16)
    mlp_ratio: int = _setting(4, gt=0, le=64)
    dropout: float = _setting(0.0, ge=0.0, lt=1.0)
    bias: bool = True
    positions: Literal["learned", "rope"] = "learned"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu-exact", "gelu", "swiglu"] = "gelu-exact"
    qk_norm: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("dh_min", "dh_max"):
            try:
                check_power_of_two(getattr(self, name))
            except ValueError as e:
                raise ValueError(f"{name}={e}") from None
        if self.dh_min > self.dh_max:
            raise ValueError(f"dh_min={self.dh_min} exceeds dh_max={self.dh_max}; swap them")

    @property
    def mlp_hidden(self) -> int:
        """Hidden width of the MLP; SwiGLU's two input matrices make 2/3 of the GELU width cost the same."""
        if self.mlp == "swiglu":
            return 8 * math.ceil(2 * self.mlp_ratio * self.d_model / 3 / 8)
        return self.mlp_ratio * self.d_model

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = _setting(400, gt=0, le=MAX_STEPS)
    batch_size: int = _setting(16, gt=0, le=2**20)
    lr: float = _setting(3e-3, gt=0, le=10)
    min_lr_ratio: float = _setting(0.1, ge=0, le=1)
    warmup_steps: int = _setting(40, ge=0, le=MAX_STEPS)
    weight_decay: float = _setting(0.1, ge=0, le=100)
    beta1: float = _setting(0.9, ge=0, lt=1)
    beta2: float = _setting(0.95, ge=0, lt=1)
    grad_clip: float = _setting(1.0, gt=0, le=1e6)
    eval_every: int = _setting(100, gt=0, le=MAX_STEPS)
    eval_batches: int = _setting(8, gt=0, le=2**20)
    seed: int = _setting(0, ge=0, le=MAX_SEED)
    device: str = "cpu"
    # auto: bf16 autocast on GPUs that run it natively, fp16 with loss scaling on older ones, fp32 on the CPU
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    compile: bool = False
    # AdamW's fused kernel: one pass over each tensor instead of about ten (on CPU the whole step is about 3% faster,
    # docs/benchmarks.md), the same update up to rounding. "cuda": fused on CUDA only, nanoGPT's rule and that of
    # configs stored before the defaults changed (EARLIER_DEFAULTS), whose CPU runs retrain bit for bit with it.
    fused_adamw: Literal["always", "cuda"] = "always"

    def __post_init__(self) -> None:
        check_fields(self)
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be below steps={self.steps}")

    def lr_at(self, step: int) -> float:
        """Linear warmup, then cosine decay to min_lr_ratio * lr at the last step."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        floor = self.lr * self.min_lr_ratio
        return floor + 0.5 * (self.lr - floor) * (1.0 + math.cos(math.pi * min(1.0, progress)))
