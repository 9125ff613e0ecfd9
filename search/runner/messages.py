"""What the driver hears back about a trial in flight: one type per kind, so the driver matches on what came
instead of guessing from Python types. A worker (search.runner.worker.TrialSession) answers `start` with
`Started`, `advance` with `Evaluated` or `Finished`, `stop` with `Finished`; a duplicate waiting for its
original gets `Wait` back from the cache's clock (search.runner.cache). All are plain picklable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prism import EvalPoint, TrainResult


@dataclass(frozen=True)
class Started:
    """The trial's model and data are ready: where it runs ({"host", "pid", "device", "kernels"}, stored as WORKER)."""

    where: dict
    warnings: tuple[str, ...] = ()  # what the worker's libraries warned meanwhile (Ray keeps worker logs on the node)


@dataclass(frozen=True)
class Evaluated:
    """One evaluation interval trained: the driver reports the point and decides whether the trial goes on."""

    point: EvalPoint
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finished:
    """The trial ended, its budget spent or stopped by the driver: its result, model freed."""

    result: TrainResult
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wait:
    """A waiting duplicate's poll came due: look at its original (by storage id) again."""

    original_id: int


Message = Started | Evaluated | Finished | Wait
