"""Which finished runs the statistics read: COMPLETE trials whose every value is a finite number.

A value of inf or nan (a run that diverged without raising, another tool's trial) is a failed run for the
statistics: one such value in a mean turns every gap, interval and verdict of its study into nan. It is left out of
every computation, and `status` counts and names it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from optuna.trial import FrozenTrial, TrialState


def scored(trial: FrozenTrial) -> bool:
    """A COMPLETE trial with values, all finite: one the statistics read."""
    return trial.state == TrialState.COMPLETE and bool(trial.values) and all(math.isfinite(v) for v in trial.values)


def not_finite(trials: Iterable[FrozenTrial]) -> list[FrozenTrial]:
    """COMPLETE trials holding an inf or nan value: failed runs for the statistics."""
    return [t for t in trials if t.state == TrialState.COMPLETE and t.values and not scored(t)]
