"""The tracker interface: an Optuna-style callback `(study, frozen_trial)` the driver calls for each finished trial.

Tracking never breaks a study: a tracker that raises is switched off for the rest of the run with one warning.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass

from search.attrs import (
    CURVE,
    FLOPS_PER_TOKEN,
    HEADS_PREFIX,
    N_PARAMS,
    ROLE,
    ROLE_SEARCH,
    SCHEDULE,
    SEED,
    THROUGHPUT_RATIO,
    TOKENS,
    TOKENS_PER_S,
    WALL_TIME_S,
    heads_attr,
)
from search.outputs.urls import mask_in, mask_url

logger = logging.getLogger("search.tracking")

# numeric user attrs (search.storage.records.result_attrs and the throughput probe) logged as run-level metrics
METRIC_ATTRS = (TOKENS_PER_S, THROUGHPUT_RATIO, N_PARAMS, FLOPS_PER_TOKEN, WALL_TIME_S, TOKENS)


@dataclass(frozen=True)
class TrialRecord:
    """What every tracker logs of one trial: its schedule and roles as params, its learning curve as steps."""

    number: int
    state: str  # COMPLETE or PRUNED
    schedule: str
    heads: tuple[int, ...]  # per layer
    seed: int
    role: str  # baseline | search | reference | confirm ...
    value: float | None  # the first objective (val loss); None for a pruned trial
    curve: tuple[tuple[int, float], ...]  # (training tokens, val loss): tokens are the step
    metrics: dict[str, float]

    @classmethod
    def from_trial(cls, trial) -> TrialRecord:
        attrs = trial.user_attrs
        heads = tuple(attrs[k] for k in sorted(attrs) if k.startswith(HEADS_PREFIX))
        return cls(
            number=trial.number,
            state=trial.state.name,
            schedule=attrs[SCHEDULE],
            heads=heads,
            seed=attrs.get(SEED, 0),
            role=attrs.get(ROLE, ROLE_SEARCH),
            value=trial.values[0] if trial.values else None,
            curve=tuple((int(t), float(v)) for t, v in attrs.get(CURVE, [])),
            metrics={k: float(attrs[k]) for k in METRIC_ATTRS if isinstance(attrs.get(k), (int, float))},
        )

    @property
    def params(self) -> dict[str, str | int]:
        heads: dict[str, str | int] = {heads_attr(layer): h for layer, h in enumerate(self.heads)}
        return {SCHEDULE: self.schedule, SEED: self.seed, ROLE: self.role, "trial": self.number, **heads}

    @property
    def run_name(self) -> str:
        return f"trial-{self.number:05d}"


class Tracker(ABC):
    """One experiment tracker. Subclasses import their library lazily, inside `log_trial`."""

    name: str  # the [tracking] field

    def __init__(self, target: str):
        self.target = target
        self.failed = False

    @abstractmethod
    def log_trial(self, study_name: str, record: TrialRecord) -> None:
        """Log one finished trial as one run, grouped under the study."""

    def __call__(self, study, trial) -> None:
        if self.failed:
            return
        try:
            self.log_trial(study.study_name, TrialRecord.from_trial(trial))
        except Exception as e:
            self.failed = True
            logger.warning(
                "tracking.%s (%s) failed on trial %d, the study goes on without it: %s: %s",
                self.name,
                mask_url(self.target),
                trial.number,
                type(e).__name__,
                mask_in(str(e).splitlines()[0], self.target) if str(e) else "",  # a client's error may quote the URI
            )
