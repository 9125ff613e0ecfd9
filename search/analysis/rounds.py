"""Confirmation in rounds (`search.confirmation = "rounds"`, the default of new studies): what each round trains, what
it froze, and how far the study is. The study package queues and trains the runs (search.study.rounds); the verdict
tests the frozen pick (search.analysis.verdict.Frozen).

Once the search has its n_trials:
- round 1 of 2: the study's best `confirm_top` schedules (the blocked model's ranking over every run) and uniform
  train one fresh seed; ranked again over every run, the best of them is the pick, frozen;
- round 2 of 2: the pick and uniform train `confirm_seeds` new seeds, which nothing ran before. Only those pairs can
  call the pick better: every earlier seed it ran counts as one it was selected on.
The seeds are `confirm`'s (study seed + CONFIRM_SEED_OFFSET + k), so a run `confirm` already trained is never trained
again. The contenders and the pick are stored once (ATTR_ROUNDS), so a resumed study goes on with what it froze,
whatever runs arrive later. Why this rule: docs/benchmarks.md, "Compute to a correct verdict" (the promoted arm).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optuna.trial import FrozenTrial, TrialState

from search.attrs import ATTR_ROUNDS, ROLE, ROLE_CONFIRM, SCHEDULE, SEED
from search.config import StudyConfig

if TYPE_CHECKING:
    import optuna

CONFIRM_SEED_OFFSET = 1000  # confirmation seeds start here past the study seed: never a search seed
N_ROUNDS = 2


@dataclass(frozen=True)
class Rounds:
    """What the rounds froze: round 1's contenders (empty until chosen) and the pick (None until round 1 is over)."""

    contenders: tuple[str, ...] = ()
    pick: str | None = None

    def to_json(self) -> str:
        return json.dumps({"contenders": list(self.contenders), "pick": self.pick})

    @classmethod
    def stored(cls, study: optuna.Study) -> Rounds:
        """What `study`'s rounds froze, as stored (ATTR_ROUNDS); nothing frozen where nothing is."""
        return cls.from_json(study.user_attrs.get(ATTR_ROUNDS))

    @classmethod
    def from_json(cls, text: object) -> Rounds:
        """As stored; anything else (not stored yet, or written by hand) is nothing frozen."""
        try:
            data = json.loads(text) if isinstance(text, str) else {}
            contenders, pick = data.get("contenders", []), data.get("pick")
            if isinstance(contenders, list) and all(isinstance(c, str) for c in contenders) and (pick is None or isinstance(pick, str)):
                return cls(tuple(contenders), pick)
        except (json.JSONDecodeError, AttributeError):
            pass
        return cls()


def round_seeds(config: StudyConfig, number: int) -> list[int]:
    """Round 1: one fresh seed; round 2: the `confirm_seeds` after it."""
    first = config.seed + CONFIRM_SEED_OFFSET
    return [first] if number == 1 else [first + 1 + k for k in range(config.search.confirm_seeds)]


def round_runs(config: StudyConfig, rounds: Rounds, number: int) -> list[tuple[str, int]]:
    """The (schedule, seed) runs of round `number`, uniform first at each seed; none before its schedules are frozen."""
    schedules = rounds.contenders if number == 1 else (rounds.pick,) if rounds.pick else ()
    if not schedules:
        return []
    return [(schedule, seed) for seed in round_seeds(config, number) for schedule in (str(config.baseline), *schedules)]


def contenders_of(ranking: list[str], config: StudyConfig) -> tuple[str, ...]:
    """Round 1's schedules: the best `confirm_top` of the ranking (schedules other than uniform, best first)."""
    return tuple(ranking[: config.search.confirm_top])


def pick_of(ranking: list[str], contenders: tuple[str, ...]) -> str:
    """The best contender by the ranking over every run once round 1 has run (the first contender if none is ranked)."""
    return next((s for s in ranking if s in contenders), contenders[0])


@dataclass(frozen=True)
class RoundsProgress:
    """How far a study's rounds are: `number` is the round under way or next (0: the search is still running;
    N_ROUNDS + 1: both are over), `finished` of `planned` its runs."""

    number: int
    rounds: Rounds
    finished: int = 0
    planned: int = 0
    seeds: tuple[int, ...] = ()

    @property
    def over(self) -> bool:
        return self.number > N_ROUNDS


def rounds_progress(trials: Iterable[FrozenTrial], config: StudyConfig, rounds: Rounds, search_done: bool) -> RoundsProgress:
    """Round k of N from the stored runs: a round is over once each of its runs finished, or failed with no retry
    left in the queue (a run that cannot train must not hold the verdict back forever)."""
    if not search_done and not rounds.contenders:
        return RoundsProgress(0, rounds)
    by_run: dict[tuple[str, int], list[TrialState]] = {}
    for t in trials:
        if t.user_attrs.get(ROLE) == ROLE_CONFIRM and SCHEDULE in t.user_attrs and SEED in t.user_attrs:
            by_run.setdefault((t.user_attrs[SCHEDULE], t.user_attrs[SEED]), []).append(t.state)
    for number in range(1, N_ROUNDS + 1):
        runs = round_runs(config, rounds, number)
        tries = [by_run.get(run, []) for run in runs]
        finished = sum(_finished(states) for states in tries)
        open_ = any(
            not _finished(states) and (not states or TrialState.WAITING in states or TrialState.RUNNING in states) for states in tries
        )
        if not runs or open_:
            return RoundsProgress(number, rounds, finished, len(runs), tuple(round_seeds(config, number)))
    return RoundsProgress(N_ROUNDS + 1, rounds, seeds=tuple(round_seeds(config, N_ROUNDS)))


def _finished(states: list[TrialState]) -> bool:
    """A run is finished once one of its tries is (PRUNED counts: a run that trained and was stopped)."""
    return TrialState.COMPLETE in states or TrialState.PRUNED in states
