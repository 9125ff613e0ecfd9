"""Racing: spend seeds on the schedules that could beat the incumbent, paired per seed.

One seed ranks schedules by noise as much as by merit, so a search that stops at one seed per schedule picks a
lucky one. Racing (SMAC3's intensification, paired here) runs a promising challenger again on more seeds:

- The search seed and the next ones are the race seeds: `seeds[0]` is the seed every search trial trains at,
  and the uniform baselines (`baseline_seeds`) are the first seeds of the same list, so their runs are reused.
- The incumbent is the schedule with the best paired mean gap to uniform (same seed: schedule minus uniform) on at
  least MIN_SEEDS seeds; uniform itself (gap 0) until one beats it.
- A challenger (a schedule with a complete run at the search seed) whose first-seed value is within `margin` of
  the incumbent's is raced: run on 2, 4, ... up to max_seeds seeds (`ladder`). Uniform and the incumbent run on
  every seed a challenger uses, so every comparison is paired.
- At each look (2, 4, ... seeds) a challenger whose paired difference to the incumbent is worse beyond noise is
  dropped: the two-sided t interval of the differences lies above 0 at level 1 - alpha / (number of looks)
  (Bonferroni over looks, as search.analysis.stats.paired_gap gives it).

`decide` is a pure function of the stored runs: the driver asks it between trials what to queue (race runs are
ordinary trials queued with fixed params, role `race` and their seed), so a killed and resumed study picks the race
up where its stored runs left it; `status` and the dashboard read the same function for where each schedule stands
(a typed `Position` per schedule, worded by `Position.text`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from optuna.trial import FrozenTrial, TrialState

from search.analysis.scored import scored
from search.analysis.stats import paired_gap
from search.attrs import SCHEDULE, SEED
from search.config import StudyConfig
from search.study.policy._base import Policy

ALPHA = 0.05  # spent over a challenger's looks
MIN_SEEDS = 3  # the incumbent's: fewer paired seeds measure no noise (search.analysis.stats.MIN_PAIRS)


@dataclass(frozen=True)
class Run:
    """One training run of a schedule at a seed: its final val loss, or None while it is queued or running, or
    when it failed (`failed`: not queued again; a failure that is retried has its retry queued)."""

    schedule: str
    seed: int
    value: float | None
    failed: bool = False


PositionKind = Literal["control", "incumbent", "failed", "under way", "waiting", "not raced", "dropped", "raced", "racing"]


@dataclass(frozen=True)
class Position:
    """Where one schedule stands in the race. `seeds`: its paired seeds so far; `upto`: the seeds it is raced to
    next (racing); `failed_seed`: the seed whose run failed (failed); `rival`, `gap`, `p`, `margin`: the
    incumbent it was measured against, the gap to it (its first seed's when not raced, the paired mean when
    dropped), the p of that gap (dropped) and the margin it was beyond (not raced)."""

    kind: PositionKind
    seeds: int | None = None
    upto: int | None = None
    failed_seed: int | None = None
    rival: str | None = None
    gap: float | None = None
    p: float | None = None
    margin: float | None = None

    def text(self) -> str:
        """A few words for `status`, the dashboard and the logs."""
        match self.kind:
            case "failed":
                return f"stopped at {self.seeds} seeds: its run at seed {self.failed_seed} failed"
            case "under way":
                return f"racing: {self.seeds} seeds, runs under way"
            case "waiting":
                return "waiting for the incumbent's first seed"
            case "not raced":
                return f"not raced: first seed worse than {self.rival} by {self.gap:+.4f} (> margin {self.margin})"
            case "dropped":
                return f"dropped at {self.seeds} seeds: worse than {self.rival} by {self.gap:+.4f} (p={self.p:.2g})"
            case "raced":
                return f"raced to {self.seeds} seeds"
            case "racing":
                return f"racing: {self.seeds} -> {self.upto} seeds"
        return self.kind  # control, incumbent

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None} | {"text": self.text()}


@dataclass(frozen=True)
class Race:
    """Where the race stands, and the runs (schedule, seed) to queue next, in order."""

    incumbent: str
    queue: list[tuple[str, int]] = field(default_factory=list)
    dropped: frozenset[str] = frozenset()
    standing: dict[str, Position] = field(default_factory=dict)  # every schedule with a run at the search seed


def ladder(max_seeds: int) -> list[int]:
    """Seed counts at which a challenger is looked at: 1, 2, 4, ... and max_seeds last."""
    levels = [1]
    while levels[-1] < max_seeds:
        levels.append(min(2 * levels[-1], max_seeds))
    return levels


def decide(runs: Iterable[Run], uniform: str, seeds: Sequence[int], margin: float, alpha: float = ALPHA) -> Race:
    """The race's state from `runs` (any roles; repeats of one schedule and seed count once), against `uniform`,
    on the race seeds `seeds` (seeds[0]: the search seed; len: max_seeds)."""
    values: dict[str, dict[int, float]] = {}
    present: set[tuple[str, int]] = set()  # finished, on its way or failed: never queued again
    failed: set[tuple[str, int]] = set()
    pending: set[tuple[str, int]] = set()
    for run in runs:
        present.add((run.schedule, run.seed))
        if run.failed:
            failed.add((run.schedule, run.seed))
        elif run.value is None:
            pending.add((run.schedule, run.seed))
        if run.value is not None and run.seed in seeds:
            values.setdefault(run.schedule, {}).setdefault(run.seed, run.value)

    def gap_to(other: str, schedule: str) -> list[float]:
        theirs = values.get(other, {})
        return [v - theirs[s] for s, v in values.get(schedule, {}).items() if s in theirs]

    qualified = {s: gap_to(uniform, s) for s in values if s != uniform and len(gap_to(uniform, s)) >= MIN_SEEDS}
    incumbent = min(qualified, key=lambda s: sum(qualified[s]) / len(qualified[s]), default=uniform)
    if incumbent != uniform and sum(qualified[incumbent]) >= 0:
        incumbent = uniform  # the control stays incumbent until a schedule beats it on average
    levels = ladder(len(seeds))
    looks = max(1, len(levels) - 1)
    queue: list[tuple[str, int]] = []
    dropped: set[str] = set()
    standing = {uniform: Position("control"), incumbent: Position("incumbent")}

    def want(schedule: str, upto: int) -> None:
        for seed in seeds[:upto]:
            if (schedule, seed) not in present and (schedule, seed) not in queue:
                queue.append((schedule, seed))

    for challenger in sorted(values):
        mine = values[challenger]
        if challenger in (uniform, incumbent) or seeds[0] not in mine:
            continue
        n = sum(seed in mine for seed in seeds)
        lost = [s for s in seeds if (challenger, s) in failed - pending and s not in mine]
        if lost:
            standing[challenger] = Position("failed", n, failed_seed=lost[0])
            continue
        waiting = any((challenger, s) in present and s not in mine for s in seeds) or any(
            s not in values.get(other, {}) and (other, s) in present for other in (uniform, incumbent) for s in seeds if s in mine
        )
        if waiting:
            standing[challenger] = Position("under way", n)
            continue
        diffs = gap_to(incumbent, challenger)
        if n == 1:
            if not diffs:  # the incumbent's first-seed run is not finished
                standing[challenger] = Position("waiting", n)
                continue
            if diffs[0] > margin:
                standing[challenger] = Position("not raced", n, rival=incumbent, gap=diffs[0], margin=margin)
                continue
        else:
            gap = paired_gap(diffs)
            if gap is not None and gap.p is not None and gap.mean > 0 and gap.p < alpha / looks:
                dropped.add(challenger)
                standing[challenger] = Position("dropped", n, rival=incumbent, gap=gap.mean, p=gap.p)
                continue
        if n >= len(seeds):
            standing[challenger] = Position("raced", n)
            continue
        upto = next(level for level in levels if level > n)
        standing[challenger] = Position("racing", n, upto=upto)
        for schedule in (challenger, incumbent, uniform):
            want(schedule, upto)
    return Race(incumbent, queue, frozenset(dropped), standing)


def race_seeds(config: StudyConfig) -> list[int]:
    """The search seed and the next ones, max_seeds in all: the uniform baselines run on the first of them."""
    return [config.seed + k for k in range(config.search.max_seeds)]


def runs_of(trials: Iterable[FrozenTrial]) -> list[Run]:
    """The stored runs a race reads: complete ones with their val loss (the first objective), queued and running
    ones without, failed ones (and complete ones without a finite value) as failed. Pruned runs have no final value:
    they do not count."""
    out = []
    for t in trials:
        if SCHEDULE not in t.user_attrs or SEED not in t.user_attrs:
            continue
        if scored(t):
            out.append(Run(t.user_attrs[SCHEDULE], t.user_attrs[SEED], t.values[0]))
        elif t.state in (TrialState.RUNNING, TrialState.WAITING):
            out.append(Run(t.user_attrs[SCHEDULE], t.user_attrs[SEED], None))
        elif t.state in (TrialState.FAIL, TrialState.COMPLETE):  # COMPLETE here: no finite value, a failed run
            out.append(Run(t.user_attrs[SCHEDULE], t.user_attrs[SEED], None, failed=True))
    return out


class Racing(Policy):
    """Racing as the driver asks it between trials: the race runs to queue next."""

    name = "racing"

    def __init__(self, config: StudyConfig):
        self.uniform, self.seeds, self.margin = str(config.baseline), race_seeds(config), config.search.margin

    def race(self, trials: Iterable[FrozenTrial]) -> Race:
        return decide(runs_of(trials), self.uniform, self.seeds, self.margin)

    def next_runs(self, trials: Sequence[FrozenTrial]) -> list[tuple[str, int]]:
        return self.race(trials).queue
