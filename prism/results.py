"""What a training run returns: its evaluation points and its result.

Plain dataclasses, apart from the trainer, so that a search driver, which only reads results a worker sends it,
never imports torch (about 1.6 s of CPU per `run`, `resume` and `confirm` on a 2-core machine).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class EvalPoint:
    step: int
    tokens: int  # training tokens seen so far: the resource pruners count in
    val_loss: float
    train_loss: float


@dataclass
class TrainResult:
    schedule: str
    final_val_loss: float
    curve: list[EvalPoint]
    tokens_per_s: float
    n_params: int
    flops_per_token: int | None  # None: an outside trainer did not report it
    wall_time_s: float
    steps: int
    tokens: int
    stopped_early: bool = False
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)
