"""A pre-registered paired experiment: one schedule against uniform, read at fixed looks until it decides.

A study with an `[experiment]` section (search.config.ExperimentSection) trains nothing but pairs: the schedule and
uniform at the study seed, then the next seed, and so on (search.study.experiment). Everything that decides it is
fixed in the config before any data exists:

- the looks: the numbers of completed pairs at which the test is read (the last is the cap on pairs);
- the margin (`[search] margin`) and alpha.

At each look the paired differences (schedule minus uniform, same seed: same initial weights, data order and
validation batches) on the first n seeds give two tests, each at alpha / (number of looks):

- *equivalent*: TOST at the margin (both one-sided tests reject): the gap lies inside (-margin, +margin);
- *better* / *worse*: the two-sided paired t test of a zero gap rejects.

Splitting alpha evenly over the looks (Bonferroni) keeps each test's error at or below alpha however many looks are
taken, with no assumption about how the looks are correlated; it is conservative, which is why the looks are few.
The first look at which either test rejects ends the experiment (equivalence is named first when both do: a gap
shown to be smaller than the margin is the answer that matters, whatever its sign); at the last look an experiment
that decided nothing ends *undecided*, with the resolution it reached. Only the experiment's own seeds count, so a
schedule picked on other seeds is judged free of that selection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prism import Schedule
from search.analysis.stats import ALPHA, Contrast, paired_contrast
from search.config import StudyConfig

OUTCOMES = ("equivalent", "better", "worse", "undecided")  # a look with one of these ends the experiment


@dataclass(frozen=True)
class Plan:
    """What was fixed before any data: the schedule compared with `uniform`, the seeds in order, the looks, the
    margin and the error rate of each test over all looks."""

    schedule: str
    uniform: str
    first_seed: int
    looks: tuple[int, ...]  # completed pairs at each look, increasing; the last is the most pairs trained
    margin: float
    alpha: float = ALPHA

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / len(self.looks)

    @property
    def seeds(self) -> list[int]:
        return [self.first_seed + k for k in range(self.looks[-1])]


@dataclass(frozen=True)
class Look:
    """The test read at one look: the gap (schedule minus uniform) on the first `pairs` seeds, its interval at
    1 - alpha_per_look, the two tests' p-values and the outcome (one of OUTCOMES, or "continue")."""

    pairs: int
    contrast: Contrast
    level: float  # of `interval`: 1 - alpha_per_look
    p_difference: float
    p_equivalence: float  # TOST at the margin
    resolution: float  # the gap a test at alpha_per_look would find with 80% power at this standard error
    outcome: str

    @property
    def interval(self) -> tuple[float, float]:
        return self.contrast.interval(self.level)


@dataclass(frozen=True)
class State:
    """Where the experiment stands: the pairs complete in seed order, every look they reached, and the next seed to
    train (None once a look decided or the last look is read)."""

    plan: Plan
    pairs: int
    looks: tuple[Look, ...]
    next_seed: int | None

    @property
    def outcome(self) -> str:
        """The deciding look's outcome, or "running" while no look has ended the experiment."""
        return self.looks[-1].outcome if self.looks and self.looks[-1].outcome in OUTCOMES else "running"


def read(plan: Plan, diffs: Sequence[float]) -> list[Look]:
    """Every look that `diffs` (paired differences in seed order, the first seeds first) reach, in order, up to the
    first that ends the experiment."""
    looks = []
    for n in plan.looks:
        if len(diffs) < n:
            break
        look = _look(plan, diffs[:n], last=n == plan.looks[-1])
        looks.append(look)
        if look.outcome != "continue":
            break
    return looks


def _look(plan: Plan, diffs: Sequence[float], last: bool) -> Look:
    c = paired_contrast(list(diffs))
    assert c is not None and c.measured  # looks start at MIN_PAIRS pairs (the config checks it)
    a = plan.alpha_per_look
    p_difference, p_equivalence = c.p, c.tost(plan.margin)
    if p_equivalence < a:
        outcome = "equivalent"
    elif p_difference < a:
        outcome = "better" if c.mean < 0 else "worse"
    else:
        outcome = "undecided" if last else "continue"
    return Look(len(diffs), c, 1 - a, p_difference, p_equivalence, c.detectable(alpha=a), outcome)


def state(plan: Plan, runs: Mapping[tuple[str, int], float]) -> State:
    """The experiment's state from the finished runs (val loss per (schedule, seed)): pairs count in seed order,
    so a look always reads the first n seeds, whatever order they finished in."""
    diffs = []
    for seed in plan.seeds:
        if (plan.schedule, seed) not in runs or (plan.uniform, seed) not in runs:
            break
        diffs.append(runs[(plan.schedule, seed)] - runs[(plan.uniform, seed)])
    looks = read(plan, diffs)
    ended = bool(looks) and looks[-1].outcome in OUTCOMES
    return State(plan, len(diffs), tuple(looks), None if ended else plan.first_seed + len(diffs))


def plan_of(config: StudyConfig) -> Plan | None:
    """The study's experiment plan, or None for a search."""
    x = config.experiment
    if x is None:
        return None
    return Plan(str(Schedule.parse(x.schedule)), str(config.baseline), config.seed, tuple(x.looks), config.search.margin, x.alpha)
