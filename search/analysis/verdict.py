"""What a study decided about its schedules against uniform; each verdict's name says what its test showed.

- *better*: a schedule beats uniform (Holm-adjusted p < ALPHA) on seeds it was not selected on: a schedule the search
  picked at its seed is judged on the other seeds only (the winner's curse), references and uniform on all of theirs.
- *uniform holds* (kind "holds"): every schedule compared is shown not to beat uniform by the margin or more
  (one-sided tests, each at ALPHA: together an intersection-union test, which needs no correction). A one-sided
  result: a schedule may still be worse than uniform by more than the margin, so it is not equivalence.
- *equivalent*: every schedule compared is shown within ±margin of uniform (two-sided TOST of each at ALPHA, again
  an intersection-union test).
- *undecided*: none of these; the verdict says about how many paired seeds would resolve the margin, with the
  command that trains them.
Every verdict states its resolution (the gap its seeds detect with 80% power), and lists the schedules worse than
uniform beyond noise after the many-to-one correction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from search.analysis.blocked import ManyToOne, ScheduleGap, many_to_one
from search.analysis.stats import ALPHA, POWER, p_text, pairs_needed

TOP_K = 3  # schedules whose TOST is shown, by mean
MAX_CONFIRM = 5  # at most this many schedules are named in the command that would decide
SHOWN_WORSE = 3  # the worst schedules the verdict's line names (to_dict lists all)


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
    method: str = ""
    equivalence: tuple[tuple[str, float], ...] = ()  # (schedule, TOST p at the margin) of the top TOP_K by mean
    worse: tuple[tuple[str, float, float], ...] = ()  # (schedule, gap, Holm-adjusted p): worse beyond noise
    seeds_needed: int | None = None  # undecided: paired seeds per schedule that would resolve the margin
    top: int | None = None  # undecided: how many schedules `command` confirms (with uniform) on those seeds
    command: str | None = None  # undecided: what trains them
    reason: str = ""  # undecided: why, in words; equivalent: what else the test found, if anything

    def text(self) -> str:
        """The first line of `status`, `best`, the dashboard and the report."""
        m = f"{self.margin:.4g}"
        if self.kind == "better":
            lo, hi = self.interval or (float("nan"), float("nan"))
            head = (
                f"better: {self.schedule} beats uniform by {self.effect:+.4f} [{lo:+.4f}, {hi:+.4f}] on {len(self.seeds)} seeds it "
                f"was not selected on (adjusted p={p_text(self.adjusted_p)}; {self.method})"
            )
        elif self.kind == "worse":  # a pre-registered experiment's outcome (search.analysis.sequential)
            lo, hi = self.interval or (float("nan"), float("nan"))
            head = (
                f"worse: {self.schedule} loses to uniform by {self.effect:+.4f} [{lo:+.4f}, {hi:+.4f}] on {len(self.seeds)} seeds "
                f"(p={p_text(self.adjusted_p)}; {self.method})"
            )
        elif self.kind == "holds":
            tost = ", ".join(f"{s} p={p_text(p)}" for s, p in self.equivalence)
            head = (
                f"uniform holds at margin {m}: none of the schedules compared beats it by {m} or more (one-sided tests, largest "
                f"p={p_text(self.adjusted_p)}; {self.method}); not shown equivalent: two-sided TOST at ±{m}: {tost}"
            )
        elif self.kind == "equivalent":
            tost = ", ".join(f"{s} p={p_text(p)}" for s, p in self.equivalence)
            head = f"equivalent: every schedule compared is within ±{m} of uniform (two-sided TOST, largest p={p_text(self.adjusted_p)}"
            head += f"; {self.method})" + (f"; closest by mean: {tost}" if tost else "")
        else:
            head = f"undecided at margin {m}: {self.reason}"
        if self.kind == "equivalent" and self.reason:  # a pre-registered experiment: what else its test found
            head += f"; {self.reason}"
        if self.resolution is not None:
            head += f"; resolution {self.resolution:.4f} ({POWER:.0%} power)"
        if self.command:
            head += f"; about {self.seeds_needed} paired seeds per schedule resolve the margin: run `{self.command}`"
        if self.worse:
            worst = sorted(self.worse, key=lambda w: -w[1])[:SHOWN_WORSE]
            named = ", ".join(f"{s} {g:+.4f} (adjusted p={p_text(p)})" for s, g, p in worst)
            more = f"; worst: {named}" if len(self.worse) > SHOWN_WORSE else f": {named}"
            head += f"; {len(self.worse)} worse than uniform beyond noise{more}"
        return head

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "schedule": self.schedule,
            "effect": self.effect,
            "interval": list(self.interval) if self.interval else None,
            "adjusted_p": self.adjusted_p,
            "margin": self.margin,
            "resolution": self.resolution,
            "seeds": list(self.seeds),
            "method": self.method,
            "equivalence": [{"schedule": s, "tost_p": p} for s, p in self.equivalence],
            "worse": [{"schedule": s, "effect": g, "adjusted_p": p} for s, g, p in self.worse],
            "seeds_needed": self.seeds_needed,
            "top": self.top,
            "command": self.command,
            "text": self.text(),
        }


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
    """The verdict with the two families it was read from: every seed, and each schedule's unselected seeds."""

    verdict: Verdict
    family: ManyToOne
    fresh: ManyToOne = field(repr=False)


def decide(
    runs: Mapping[tuple[str, int], float],
    control: str,
    selected_on: Mapping[str, set[int]],
    margin: float,
    confirm_command: str = "prism-search confirm STUDY",
    frozen: Frozen | None = None,
) -> Decision:
    """`runs`: val loss per (schedule, seed), every role; `selected_on`: the seeds each schedule was picked on (a
    search trial's seed); `confirm_command`: `confirm` for this study, to which --top and --seeds are added;
    `frozen`: a study confirmed in rounds, whose "better" is the frozen pick's test alone."""
    family = many_to_one(runs, control)
    fresh = many_to_one({k: v for k, v in runs.items() if k[1] not in selected_on.get(k[0], set())}, control)
    worse = tuple(
        (g.schedule, g.contrast.mean, g.adjusted_p)
        for g in family.gaps
        if g.adjusted_p is not None and g.adjusted_p < ALPHA and g.contrast.mean > 0
    )
    if not family.gaps:
        return Decision(Verdict("undecided", margin, reason="no schedule has been compared with uniform yet"), family, fresh)
    if frozen is not None:
        if (test := _frozen_test(runs, control, frozen)) is not None:
            gap, method = test
            return Decision(_about("better", margin, gap, method, gap.contrast.p, worse=worse), family, fresh)
    else:
        order = {g.schedule: i for i, g in enumerate(family.gaps)}
        winners = sorted(
            (g for g in fresh.gaps if g.adjusted_p is not None and g.adjusted_p < ALPHA and g.contrast.mean < 0),
            key=lambda g: order[g.schedule],
        )
        if winners:
            w = winners[0]
            return Decision(_about("better", margin, w, fresh.method, w.adjusted_p, worse=worse), family, fresh)
    best = family.gaps[0]
    if all(g.contrast.measured for g in family.gaps):
        p_beats = [g.contrast.p_not_better_by(margin) for g in family.gaps]
        if max(p_beats) < ALPHA:
            tosts = [g.contrast.tost(margin) for g in family.gaps]
            equivalence = tuple((g.schedule, p) for g, p in zip(family.gaps[:TOP_K], tosts))
            kind, p = ("equivalent", max(tosts)) if max(tosts) < ALPHA else ("holds", max(p_beats))
            verdict = _about(kind, margin, best, family.method, p, equivalence=equivalence, worse=worse)
            return Decision(verdict, family, fresh)
    return Decision(_undecided(family, fresh, best, margin, worse, confirm_command), family, fresh)


def _frozen_test(runs: Mapping[tuple[str, int], float], control: str, frozen: Frozen) -> tuple[ScheduleGap, str] | None:
    """The frozen pick's gap on its post-freeze seeds when it beats uniform there (p < ALPHA, Holm over 1), with the
    method's words; None otherwise."""
    if frozen.pick is None or not frozen.ready:
        return None
    label = FROZEN_LABEL.format(frozen.pick)
    relabelled = {((label if s == frozen.pick and seed in frozen.seeds else s), seed): y for (s, seed), y in runs.items()}
    pooled = many_to_one(relabelled, control)
    gap = pooled.gap(label)
    if gap is None or not gap.contrast.measured or not (gap.contrast.p < ALPHA and gap.contrast.mean < 0):
        return None
    method = (
        f"frozen after confirmation round 1, tested on its {len(gap.seeds)} round-2 seeds alone: blocked model (schedule + seed) "
        f"over every run, {gap.contrast.df} df, Holm over 1"
    )
    return replace(gap, schedule=frozen.pick), method


def _undecided(family: ManyToOne, fresh: ManyToOne, best: ScheduleGap, margin: float, worse: tuple, confirm_command: str) -> Verdict:
    open_ = [g for g in family.gaps if not g.contrast.measured or g.contrast.p_not_better_by(margin) >= ALPHA]
    c = best.contrast
    if c.measured:
        lo, hi = c.interval()
        reason = f"best other schedule by mean {best.schedule} {c.mean:+.4f} [{lo:+.4f}, {hi:+.4f}] on {c.n} seed{'s' * (c.n != 1)}"
    else:
        reason = f"best other schedule by mean {best.schedule} {c.mean:+.4f} on {c.n} seed{'s' * (c.n != 1)}, noise not measured"
    reason += f"; {len(open_)} schedule{'s' * (len(open_) != 1)} may still beat uniform by {margin:.4g} or more"
    needed = pairs_needed(family.sd_pair, margin) if family.sd_pair else None
    if family.sd_pair and needed is None:
        reason += f" (the margin is below what seeds resolve at paired sd {family.sd_pair:.4f})"
    seeds, top = (needed if needed is not None else 3), min(len(open_), MAX_CONFIRM)
    command = f"{confirm_command} --top {top} --seeds {seeds}" if open_ else None
    fresh_best = fresh.gap(best.schedule)
    return _about(
        "undecided",
        margin,
        best,
        family.method,
        best.adjusted_p,
        seeds=fresh_best.seeds if fresh_best else (),
        worse=worse,
        seeds_needed=seeds if command else None,
        top=top if command else None,
        command=command,
        reason=reason,
    )


def _about(kind: str, margin: float, gap: ScheduleGap, method: str, adjusted_p: float | None, **rest) -> Verdict:
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
