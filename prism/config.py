"""Model and training configuration: plain, torch-free dataclasses that check themselves.

The search service validates its study configs against these same classes, so each setting is declared once."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

POSITIONS = ("learned", "rope")
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-2-style decoder. Head counts live in the `Schedule`, not here.

    `dh_min`/`dh_max` bound the head dimension d_model / heads that a schedule may use: powers of two keep
    attention kernels on their fast paths, and the bounds keep heads from being uselessly narrow or wide.

    Variants (the defaults are GPT-2): `positions` learned absolute or rotary (RoPE, applied per head at that
    layer's head dim, no parameters); `norm` LayerNorm or RMSNorm; `mlp` GELU or SwiGLU (hidden width 2/3 of
    mlp_ratio * d_model, rounded up to a multiple of 8, so it costs about what the GELU MLP costs); `qk_norm`
    RMS-normalises queries and keys per head with a d_model-wide gain. None of them has a parameter whose shape
    depends on the head count, so every variant keeps schedules parameter- and FLOP-neutral.
    """

    vocab_size: int = 256
    n_layer: int = 6
    d_model: int = 128
    block_size: int = 128
    dh_min: int = 64
    dh_max: int = 256
    mlp_ratio: int = 4
    dropout: float = 0.0
    bias: bool = True
    positions: str = "learned"
    norm: str = "layernorm"
    mlp: str = "gelu"
    qk_norm: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "d_model", "block_size", "dh_min", "dh_max", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("dh_min", "dh_max"):
            if not is_power_of_two(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)} is not a power of two; use e.g. 32, 64, 128 or 256")
        if self.dh_min > self.dh_max:
            raise ValueError(f"dh_min={self.dh_min} exceeds dh_max={self.dh_max}; swap them")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        for name, choices in (("positions", POSITIONS), ("norm", NORMS), ("mlp", MLPS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {', '.join(choices)}")

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
    steps: int = 400
    batch_size: int = 16
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 40
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8
    seed: int = 0
    device: str = "cpu"
    precision: str = "auto"  # auto: bf16 autocast on CUDA (when supported), fp32 elsewhere; or fp32 | bf16
    compile: bool = False

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision={self.precision!r} is not one of auto, fp32, bf16")
        for name in ("steps", "batch_size", "eval_every", "eval_batches"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ValueError(f"warmup_steps must be in [0, steps), got {self.warmup_steps}")

    def lr_at(self, step: int) -> float:
        """Linear warmup, then cosine decay to min_lr_ratio * lr at the last step."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        floor = self.lr * self.min_lr_ratio
        return floor + 0.5 * (self.lr - floor) * (1.0 + math.cos(math.pi * min(1.0, progress)))
