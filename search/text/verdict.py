"""The words for a verdict (search.analysis.verdict): the first line of `status`, `best`, the dashboard and the
report, the reason an undecided study gives, how its test was made, and the verdict's JSON."""

from __future__ import annotations

from search.analysis.blocked import Fit
from search.analysis.sequential import Plan, State
from search.analysis.stats import POWER
from search.analysis.verdict import FrozenTest, Method, Open, Uncompared, Verdict
from search.text.commands import confirm_line
from search.text.sequential import look_text, plan_text, state_text
from search.text.stats import p_text

SHOWN_WORSE = 3  # the worst schedules the verdict's line names (its JSON lists all)


def _s(n: int) -> str:
    return "s" * (n != 1)


def method_text(method: Method | None) -> str:
    """How the verdict's test was made: a family's fit, the frozen pick's test, an experiment's plan ("" for none)."""
    match method:
        case Fit(residual_df=df, holm_over=over, shrunk=shrunk):
            ranked = "; ranked by gaps shrunk by their noise (empirical Bayes)" if shrunk else ""
            if df is not None:
                return f"blocked model (schedule + seed), {df} df, Holm over {over}{ranked}"
            if not over:
                return "paired t per schedule; none has two paired seeds yet, so none is tested"
            return f"paired t per schedule, Holm over {over}{ranked}"
        case FrozenTest(seeds=seeds, df=df):
            return (
                f"frozen after confirmation round 1, tested on its {seeds} round-2 seeds alone: blocked model (schedule + seed) "
                f"over every run, {df} df, Holm over 1"
            )
        case Plan():
            return f"pre-registered: {plan_text(method)}"
    return ""


def _open_text(why: Open, margin: float) -> str:
    c = why.contrast
    if c.measured:
        lo, hi = c.interval()
        said = f"best other schedule by mean {why.best} {c.mean:+.4f} [{lo:+.4f}, {hi:+.4f}] on {c.n} seed{_s(c.n)}"
    else:
        said = f"best other schedule by mean {why.best} {c.mean:+.4f} on {c.n} seed{_s(c.n)}, noise not measured"
    said += f"; {why.count} schedule{_s(why.count)} may still beat uniform by {margin:.4g} or more"
    if why.sd_beyond is not None:
        said += f" (the margin is below what seeds resolve at paired sd {why.sd_beyond:.4f})"
    return said


def _experiment_text(now: State, kind: str) -> str:
    """An undecided experiment: where it stands and its last look; an equivalent one: whether it also differs."""
    look = now.looks[-1] if now.looks else None
    if kind == "undecided":
        return state_text(now) + (f"; last look: {look_text(look, now.plan)}" if look else "")
    if kind != "equivalent" or look is None:
        return ""
    lo, hi = look.interval
    gap = f"{look.contrast.mean:+.4f} [{lo:+.4f}, {hi:+.4f}]"
    if look.p_difference < now.plan.alpha_per_look:
        return f"it also differs from uniform, by {gap} (p={p_text(look.p_difference)}), a gap inside the margin"
    return f"gap {gap} on {look.pairs} pairs"


def reason_text(v: Verdict) -> str:
    """Why a study is undecided; for an experiment that ended equivalent, what else its test found ("" for none)."""
    match v.reason:
        case Uncompared():
            return "no schedule has been compared with uniform yet"
        case Open():
            return _open_text(v.reason, v.margin)
        case State():
            return _experiment_text(v.reason, v.kind)
    return ""


def verdict_text(v: Verdict, study: str) -> str:
    """The first line of `status`, `best`, the dashboard and the report; `study` names the confirm command to run."""
    m, method = f"{v.margin:.4g}", method_text(v.method)
    if v.kind == "better":
        lo, hi = v.interval or (float("nan"), float("nan"))
        head = (
            f"better: {v.schedule} beats uniform by {v.effect:+.4f} [{lo:+.4f}, {hi:+.4f}] on {len(v.seeds)} seeds it "
            f"was not selected on (adjusted p={p_text(v.adjusted_p)}; {method})"
        )
    elif v.kind == "worse":  # a pre-registered experiment's outcome (search.analysis.sequential)
        lo, hi = v.interval or (float("nan"), float("nan"))
        head = (
            f"worse: {v.schedule} loses to uniform by {v.effect:+.4f} [{lo:+.4f}, {hi:+.4f}] on {len(v.seeds)} seeds "
            f"(p={p_text(v.adjusted_p)}; {method})"
        )
    elif v.kind == "holds":
        tost = ", ".join(f"{s} p={p_text(p)}" for s, p in v.equivalence)
        head = (
            f"uniform holds at margin {m}: none of the schedules compared beats it by {m} or more (one-sided tests, largest "
            f"p={p_text(v.adjusted_p)}; {method}); not shown equivalent: two-sided TOST at ±{m}: {tost}"
        )
    elif v.kind == "equivalent":
        tost = ", ".join(f"{s} p={p_text(p)}" for s, p in v.equivalence)
        head = f"equivalent: every schedule compared is within ±{m} of uniform (two-sided TOST, largest p={p_text(v.adjusted_p)}"
        head += f"; {method})" + (f"; closest by mean: {tost}" if tost else "")
    else:
        head = f"undecided at margin {m}: {reason_text(v)}"
    if v.kind == "equivalent" and (also := reason_text(v)):  # a pre-registered experiment: what else its test found
        head += f"; {also}"
    if v.resolution is not None:
        head += f"; resolution {v.resolution:.4f} ({POWER:.0%} power)"
    if (step := v.next) is not None:
        head += f"; about {step.seeds} paired seeds per schedule resolve the margin: run `{confirm_line(study, step.top, step.seeds)}`"
    if v.worse:
        worst = sorted(v.worse, key=lambda w: -w[1])[:SHOWN_WORSE]
        named = ", ".join(f"{s} {g:+.4f} (adjusted p={p_text(p)})" for s, g, p in worst)
        more = f"; worst: {named}" if len(v.worse) > SHOWN_WORSE else f": {named}"
        head += f"; {len(v.worse)} worse than uniform beyond noise{more}"
    return head


def verdict_json(v: Verdict, study: str) -> dict:
    """The verdict in `status --json`: its numbers, and the words and command the table shows."""
    return {
        "kind": v.kind,
        "schedule": v.schedule,
        "effect": v.effect,
        "interval": list(v.interval) if v.interval else None,
        "adjusted_p": v.adjusted_p,
        "margin": v.margin,
        "resolution": v.resolution,
        "seeds": list(v.seeds),
        "method": method_text(v.method),
        "equivalence": [{"schedule": s, "tost_p": p} for s, p in v.equivalence],
        "worse": [{"schedule": s, "effect": g, "adjusted_p": p} for s, g, p in v.worse],
        "seeds_needed": v.next.seeds if v.next else None,
        "top": v.next.top if v.next else None,
        "command": confirm_line(study, v.next.top, v.next.seeds) if v.next else None,
        "text": verdict_text(v, study),
    }
