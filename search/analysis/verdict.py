"""What a study decided about its schedules against uniform; each verdict's name says what its test showed.

- *better*: a schedule beats uniform (Holm-adjusted p < ALPHA) on seeds it was not selected on: a schedule the search
  picked at its seed is judged on the other seeds only (the winner's curse), references and uniform on all of theirs.
- *uniform holds* (kind "holds"): every schedule compared is shown not to beat uniform by the margin or more
  (one-sided tests, each at ALPHA: together an intersection-union test, which needs no correction). A one-sided
  result: a schedule may still be worse than uniform by more than the margin, so it is not equivalence.
- *equivalent*: every schedule compared is shown within ±margin of uniform (two-sided TOST of each at ALPHA, again
  an intersection-union test).
- *undecided*: none of these; the verdict says why (`Open`) and about how many paired seeds would resolve the margin
  (`Confirm`: what `prism-search confirm` would train).
Every verdict states its resolution (the gap its seeds detect with 80% power), and lists the schedules worse than
uniform beyond noise after the many-to-one correction. Values only: search.text.verdict writes the words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from search.analysis.blocked import Fit, ManyToOne, ScheduleGap, many_to_one
from search.analysis.sequential import Plan, State
from search.analysis.stats import ALPHA, Contrast, pairs_needed

TOP_K = 3  # schedules whose TOST is shown, by mean
MAX_CONFIRM = 5  # at most this many schedules are named in the confirmation that would decide


@dataclass(frozen=True)
class Confirm:
    """The step that would decide an undecided search: its `top` schedules by mean and uniform on `seeds` paired
    confirmation seeds each (`prism-search confirm --top --seeds`; search.text writes the command)."""

    top: int
    seeds: int


@dataclass(frozen=True)
class FrozenTest:
    """How a study confirmed in rounds tested its frozen pick: on its `seeds` round-2 seeds alone, the blocked model
    over every run with `df` residual df, Holm over 1 (Frozen)."""

    seeds: int
    df: int


@dataclass(frozen=True)
class Uncompared:
    """Why a study is undecided before any schedule has a run paired with uniform: nothing to test yet."""


@dataclass(frozen=True)
class Open:
    """Why a search is undecided: `count` schedules may still beat uniform by the margin. `best` is the best other
    schedule by mean, with its contrast over every seed it shares with uniform; `sd_beyond` the sd of one paired
    difference at which no count of seeds (up to pairs_needed's cap) resolves the margin, else None."""

    best: str
    contrast: Contrast
    count: int
    sd_beyond: float | None = None


Method = Fit | FrozenTest | Plan  # how the verdict's test was made: a family's fit, the frozen pick's, an experiment's plan
Reason = Uncompared | Open | State  # why it is undecided; an experiment's state also says what else its looks found


@dataclass(frozen=True)
class Verdict:
    kind: str  # better | holds | equivalent | undecided; a pre-registered experiment may also end worse
    margin: float
    schedule: str | None = None  # better: the winner; otherwise the best schedule other than uniform by paired mean
    effect: float | None = None  # its gap to uniform (negative = better), on `seeds`
    interval: tuple[float, float] | None = None  # 95%
    adjusted_p: float | None = None  # better: Holm over the family; holds: the largest one-sided p; equivalent: largest TOST p
    resolution: float | None = None  # the gap detected with 80% power at `schedule`'s current seeds
    seeds: tuple[int, ...] = ()  # the seeds the verdict on `schedule` was judged on
    method: Method | None = None  # how its test was made (None: nothing was tested)
    equivalence: tuple[tuple[str, float], ...] = ()  # (schedule, TOST p at the margin) of the top TOP_K by mean
    worse: tuple[tuple[str, float, float], ...] = ()  # (schedule, gap, Holm-adjusted p): worse beyond noise
    next: Confirm | None = None  # undecided: the confirmation that would resolve the margin (None: none would, or the rounds decide)
    reason: Reason | None = None  # undecided: why; an experiment's: where it stands (what else its test found, if equivalent)


@dataclass(frozen=True)
class Frozen:
    """Confirmation in rounds (search.analysis.rounds): only `pick`, frozen before `seeds` ran, can be called better,
    and only on those seeds, once none of them is still to run (`ready`; testing as they arrive would test the same
    pick again at every look). Its runs there are relabelled as a schedule of their own and the blocked model is fitted
    to every run of the study: the contrast is its mean paired gap on those seeds, with the residual variance pooled
    over every schedule and seed (more df than its own paired t), alone in its family (Holm over 1). The residuals are
    independent of the fitted values the search and round 1 selected on, and the seeds are new draws: the error
    rate holds (the global null of docs/benchmarks.md, "Compute to a correct verdict", measures it)."""

    pick: str | None  # None: not frozen yet
    seeds: frozenset[int]
    ready: bool


FROZEN_LABEL = "{} (after it was frozen)"  # the pick's post-freeze runs as a schedule of their own


@dataclass(frozen=True)
class Decision:
    """The verdict with the two families it was read from: every seed, and each schedule's unselected seeds; for a
    "better" verdict, `judged`: the contrast it rests on (a frozen pick's: its round-2 seeds alone)."""

    verdict: Verdict
    family: ManyToOne
    fresh: ManyToOne = field(repr=False)
    judged: Contrast | None = None


def decide(
    runs: Mapping[tuple[str, int], float],
    control: str,
    selected_on: Mapping[str, set[int]],
    margin: float,
    frozen: Frozen | None = None,
) -> Decision:
    """`runs`: val loss per (schedule, seed), every role; `selected_on`: the seeds each schedule was picked on (a
    search trial's seed); `frozen`: a study confirmed in rounds, whose "better" is the frozen pick's test alone."""
    family = many_to_one(runs, control)
    fresh = many_to_one({k: v for k, v in runs.items() if k[1] not in selected_on.get(k[0], set())}, control)
    worse = tuple(
        (g.schedule, g.contrast.mean, g.adjusted_p)
        for g in family.gaps
        if g.adjusted_p is not None and g.adjusted_p < ALPHA and g.contrast.mean > 0
    )
    if not family.gaps:
        return Decision(Verdict("undecided", margin, reason=Uncompared()), family, fresh)
    if frozen is not None:
        if (test := _frozen_test(runs, control, frozen)) is not None:
            gap, method = test
            return Decision(_about("better", margin, gap, method, gap.contrast.p, worse=worse), family, fresh, gap.contrast)
    else:
        order = {g.schedule: i for i, g in enumerate(family.gaps)}
        winners = sorted(
            (g for g in fresh.gaps if g.adjusted_p is not None and g.adjusted_p < ALPHA and g.contrast.mean < 0),
            key=lambda g: order[g.schedule],
        )
        if winners:
            w = winners[0]
            return Decision(_about("better", margin, w, fresh.method, w.adjusted_p, worse=worse), family, fresh, w.contrast)
    best = family.gaps[0]
    if all(g.contrast.measured for g in family.gaps):
        p_beats = [g.contrast.p_not_better_by(margin) for g in family.gaps]
        if max(p_beats) < ALPHA:
            tosts = [g.contrast.tost(margin) for g in family.gaps]
            equivalence = tuple((g.schedule, p) for g, p in zip(family.gaps[:TOP_K], tosts))
            kind, p = ("equivalent", max(tosts)) if max(tosts) < ALPHA else ("holds", max(p_beats))
            verdict = _about(kind, margin, best, family.method, p, equivalence=equivalence, worse=worse)
            return Decision(verdict, family, fresh)
    return Decision(_undecided(family, fresh, best, margin, worse), family, fresh)


def _frozen_test(runs: Mapping[tuple[str, int], float], control: str, frozen: Frozen) -> tuple[ScheduleGap, FrozenTest] | None:
    """The frozen pick's gap on its post-freeze seeds when it beats uniform there (p < ALPHA, Holm over 1), with how
    it was tested; None otherwise."""
    if frozen.pick is None or not frozen.ready:
        return None
    label = FROZEN_LABEL.format(frozen.pick)
    relabelled = {((label if s == frozen.pick and seed in frozen.seeds else s), seed): y for (s, seed), y in runs.items()}
    pooled = many_to_one(relabelled, control)
    gap = pooled.gap(label)
    if gap is None or not gap.contrast.measured or not (gap.contrast.p < ALPHA and gap.contrast.mean < 0):
        return None
    return replace(gap, schedule=frozen.pick), FrozenTest(len(gap.seeds), gap.contrast.df)


def _undecided(family: ManyToOne, fresh: ManyToOne, best: ScheduleGap, margin: float, worse: tuple) -> Verdict:
    open_ = [g for g in family.gaps if not g.contrast.measured or g.contrast.p_not_better_by(margin) >= ALPHA]
    needed = pairs_needed(family.sd_pair, margin) if family.sd_pair else None
    beyond = family.sd_pair if family.sd_pair and needed is None else None
    fresh_best = fresh.gap(best.schedule)
    return _about(
        "undecided",
        margin,
        best,
        family.method,
        best.adjusted_p,
        seeds=fresh_best.seeds if fresh_best else (),
        worse=worse,
        next=Confirm(min(len(open_), MAX_CONFIRM), needed if needed is not None else 3) if open_ else None,
        reason=Open(best.schedule, best.contrast, len(open_), beyond),
    )


def _about(kind: str, margin: float, gap: ScheduleGap, method: Method, adjusted_p: float | None, **rest) -> Verdict:
    """A verdict about `gap`'s schedule: its effect, interval and resolution where its noise is measured."""
    c = gap.contrast
    fields = {"seeds": gap.seeds} | rest
    return Verdict(
        kind,
        margin,
        gap.schedule,
        c.mean,
        c.interval() if c.measured else None,
        adjusted_p,
        c.detectable() if c.measured else None,
        method=method,
        **fields,
    )


def experiment_verdict(now: State) -> Verdict:
    """A pre-registered experiment's verdict (search.analysis.sequential), in the form every study's first line
    takes: the deciding look's, or undecided while it runs (with the last look read, if any)."""
    plan, look = now.plan, now.looks[-1] if now.looks else None
    if look is None:
        return Verdict("undecided", plan.margin, plan.schedule, seeds=tuple(plan.seeds[: now.pairs]), method=plan, reason=now)
    read_at = Verdict(
        "undecided",
        plan.margin,
        plan.schedule,
        look.contrast.mean,
        look.interval,
        look.p_difference,
        look.resolution,
        seeds=tuple(plan.seeds[: look.pairs]),
        method=plan,
        reason=now,
    )
    if look.outcome in ("better", "worse"):
        return replace(read_at, kind=look.outcome)
    if look.outcome == "equivalent":
        return replace(read_at, kind="equivalent", adjusted_p=look.p_equivalence, equivalence=((plan.schedule, look.p_equivalence),))
    return read_at
