"""The rules a study follows between trials, one file per policy behind a small base (as search.families):

- `StopWhenExhausted`: end a study whose sampler can give no new schedule (exhaustion.py);
- `Racing`: run schedules within the margin of the incumbent again on more paired seeds (racing.py);
- `Sequential`: a pre-registered experiment's next pair (sequential.py).

Policies decide from the stored trials alone; search.analysis reads them. `Standing` is where a study's policies
stand, for `status` and the dashboard: the same answer the driver acted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, is_dataclass

from optuna.trial import FrozenTrial

from search.analysis import Budget
from search.analysis.budget import budget
from search.config import StudyConfig
from search.families import ScheduleFamily
from search.study.policy._base import Policy, Stop
from search.study.policy.exhaustion import Exhausted, StopWhenExhausted, duplicate_cap, exhausted
from search.study.policy.racing import ALPHA, MIN_SEEDS, Position, Race, Racing, Run, decide, ladder, race_seeds, runs_of
from search.study.policy.sequential import MAX_TRIES, Pair, Sequential

__all__ = [
    "ALPHA",
    "MAX_TRIES",
    "MIN_SEEDS",
    "Exhausted",
    "Pair",
    "Policy",
    "Position",
    "Race",
    "Racing",
    "Run",
    "Sequential",
    "Standing",
    "Stop",
    "StopWhenExhausted",
    "decide",
    "duplicate_cap",
    "exhausted",
    "first_stop",
    "ladder",
    "race_seeds",
    "runs_of",
    "search_policies",
]


def search_policies(config: StudyConfig, family: ScheduleFamily) -> list[Policy]:
    """What a search study's driver asks between trials: the stop rule, and racing where the config turns it on."""
    policies: list[Policy] = [StopWhenExhausted(family, config.n_trials)]
    if config.search.racing:
        policies.append(Racing(config))
    return policies


def first_stop(policies: Sequence[Policy], done: Budget) -> Stop | None:
    """Why the first policy that stops the study stops it, or None."""
    return next((why for policy in policies if (why := policy.stop(done)) is not None), None)


@dataclass(frozen=True)
class Standing:
    """Where a study's policies stand: why it stopped short of n_trials (None: it did not), and its race (None:
    not racing)."""

    stopped: Stop | None = None
    race: Race | None = None

    @classmethod
    def of(cls, trials: Sequence[FrozenTrial], config: StudyConfig) -> Standing:
        """Where the search policies of the study in `config` stand on its stored `trials` (an experiment has
        neither): the trials `search.storage.records.readable` kept, those the summary reads too (one check of
        their attrs serves both)."""
        done = budget(trials, config.seed)
        stopped = first_stop(search_policies(config, config.family), done) if done.searched < config.n_trials else None
        race = Racing(config).race(trials) if config.search.racing else None
        return cls(stopped, race)

    def to_dict(self) -> dict:
        """For `status --json`: each value typed, with its text beside it."""
        stopped = None if self.stopped is None else _fields(self.stopped) | {"text": self.stopped.text()}
        race = None if self.race is None else {s: p.to_dict() for s, p in self.race.standing.items()}
        return {"stopped": stopped, "race": race}


def _fields(stop: Stop) -> dict:
    return asdict(stop) if is_dataclass(stop) and not isinstance(stop, type) else {}
